package cli

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"
)

// Commit and Date are the commit and the commit time (RFC 3339) of a
// release build, set like [Version]:
//
//	-ldflags "-X github.com/openplaybook/openplaybook/cmd/openplaybook/cli.Commit=... -X github.com/openplaybook/openplaybook/cmd/openplaybook/cli.Date=..."
//
// When empty, the vcs.revision and vcs.time the go command stamps into the
// build information are used (a build from a clone), else "".
var Commit, Date = "", ""

// Formats are the OpenPlaybook format versions this binary reads.
var Formats = []string{"1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6"}

// buildInfo is what `openplaybook version --format json` prints.
type buildInfo struct {
	Version string   `json:"version"`
	Commit  string   `json:"commit"`
	Date    string   `json:"date"`
	Go      string   `json:"go"`
	Formats []string `json:"formats"`
}

func (c *CLI) buildInfo() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return c.buildInfoFrom(bi)
}

// buildInfoFrom is buildInfo with the build information bi (nil when
// there is none).
func (c *CLI) buildInfoFrom(bi *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: c.version(), Commit: Commit, Date: Date, Go: goruntime.Version(), Formats: Formats}
	if bi != nil {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			}
		}
	}
	return b
}

// versionText is the text of `openplaybook version` and --version.
func (c *CLI) versionText() string {
	b := c.buildInfo()
	s := "openplaybook " + b.Version + "\n"
	if b.Commit != "" {
		s += "commit " + b.Commit
		if b.Date != "" {
			s += " (" + b.Date + ")"
		}
		s += "\n"
	}
	return s + fmt.Sprintf("reads OpenPlaybook %s to %s\n", b.Formats[0], b.Formats[len(b.Formats)-1])
}

func (c *CLI) versionCommand() *cobra.Command {
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "version [--format text|json]",
		DisableFlagsInUseLine: true,
		Short:                 "Print the openplaybook version and the formats it reads",
		Long: `Version prints the openplaybook version, the commit and commit time it was
built from (when known), and the OpenPlaybook format versions it reads.
'openplaybook --version' prints the same text.

--format json prints {"version", "commit", "date", "go", "formats"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if format.value == "json" {
				var b []byte
				b, err = json.Marshal(c.buildInfo(), jsontext.WithIndent("  "))
				if err == nil {
					_, err = fmt.Fprintln(c.stdout(), string(b))
				}
			} else {
				_, err = fmt.Fprint(c.stdout(), c.versionText())
			}
			if err != nil {
				return ioError(err)
			}
			return nil
		},
	}
	formatFlag(cmd, format, "output format: text or json")
	return cmd
}
