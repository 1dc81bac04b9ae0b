package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/syntax"
)

// maxMaxSize is the largest --max-size: the reader's offsets are 32-bit
// (see [syntax.MaxSizeLimit]).
const maxMaxSize = syntax.MaxSizeLimit

// sizeFlag is --max-size: the largest document a command reads, in bytes.
// It accepts plain bytes or a number with a unit: KB, MB, GB (powers of
// 10) or KiB, MiB, GiB (powers of 2), in any case ("64MiB", "64mb").
type sizeFlag struct{ bytes int }

func newSizeFlag() *sizeFlag { return &sizeFlag{bytes: syntax.DefaultMaxSize} }

func (f *sizeFlag) String() string { return formatSize(f.bytes) }
func (f *sizeFlag) Type() string   { return "BYTES" }

func (f *sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	f.bytes = n
	return nil
}

var sizeUnits = []struct {
	suffix string
	mul    int64
}{
	// Longest first, so "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"b", 1},
}

// parseSize reads a --max-size value.
func parseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mul := int64(1)
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mul = strings.TrimSpace(num), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size: give a positive number of bytes, or a number with KB, MB, GB, KiB, MiB or GiB (64MiB)", s)
	}
	if n > maxMaxSize/mul {
		return 0, fmt.Errorf("%s is more than the largest size the reader accepts, %s (%d bytes)", s, formatSize(maxMaxSize), maxMaxSize)
	}
	return int(n * mul), nil
}

// formatSize writes n bytes the way --max-size reads it, in GiB, MiB or
// KiB when it is a whole number of them.
func formatSize(n int) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + "GiB"
	case n > 0 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n > 0 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n)
}

// maxSizeFlag registers --max-size on cmd.
func maxSizeFlag(cmd *cobra.Command, f *sizeFlag) {
	cmd.Flags().Var(f, "max-size", "largest document to read, in bytes or with a unit: KB, MB, GB, KiB, MiB, GiB (up to "+formatSize(maxMaxSize)+")")
}
