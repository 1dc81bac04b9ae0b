package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/openplaybook/openplaybook/syntax"
)

// StdinName is the file name diagnostics carry for a document read from
// standard input (the path "-").
const StdinName = "<stdin>"

// input is one document to read: from the file path, or from stdin when
// stdin is set. name is what diagnostics call it.
type input struct {
	name  string
	path  string
	stdin bool
	src   []byte // the document itself, when it does not come from a file
}

// expand turns command-line paths into the documents they name: a file is
// itself (whatever its extension), a directory is the *.json files
// directly in it (not its subdirectories), sorted by name, and "-" is
// standard input (at most once). A path named twice is read once. Every
// path that cannot be used is an error; all of them are returned, joined.
func expand(paths []string) ([]input, error) {
	var (
		out  []input
		errs []error
		seen = map[string]bool{}
	)
	add := func(in input) {
		if !seen[in.name] {
			seen[in.name] = true
			out = append(out, in)
		}
	}
	for _, p := range paths {
		if p == "-" {
			if seen[StdinName] {
				errs = append(errs, errors.New(`"-" (standard input) is given more than once`))
				continue
			}
			add(input{name: StdinName, stdin: true})
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !fi.IsDir() {
			name := filepath.Clean(p)
			add(input{name: name, path: name})
			continue
		}
		files, err := jsonFiles(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(files) == 0 {
			errs = append(errs, fmt.Errorf("directory %s has no *.json files (directories are not searched recursively)", p))
			continue
		}
		for _, f := range files {
			add(input{name: f, path: f})
		}
	}
	return out, errors.Join(errs...)
}

// jsonFiles lists the regular files (or links to them) named *.json
// directly in dir, sorted.
func jsonFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			fi, err := os.Stat(p)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
		} else if !e.Type().IsRegular() {
			continue
		}
		files = append(files, p)
	}
	slices.Sort(files)
	return files, nil
}

// errTooLarge reports a document larger than the reader's size limit,
// which is not read into memory at all.
type errTooLarge struct{ size int64 }

func (e errTooLarge) Error() string {
	if e.size < 0 {
		return fmt.Sprintf("document is more than %d bytes; the limit is %d bytes", syntax.DefaultMaxSize, syntax.DefaultMaxSize)
	}
	return fmt.Sprintf("document is %d bytes; the limit is %d bytes", e.size, syntax.DefaultMaxSize)
}

// readFile reads a document from a file, refusing (with errTooLarge)
// one over the reader's size limit before reading it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > syntax.DefaultMaxSize {
		return nil, errTooLarge{fi.Size()}
	}
	src, err := readLimited(f)
	if err != nil && !errors.As(err, new(errTooLarge)) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return src, err
}

// readStdin reads a document from standard input, or errTooLarge.
func (c *CLI) readStdin() ([]byte, error) {
	src, err := readLimited(c.stdin())
	if err != nil && !errors.As(err, new(errTooLarge)) {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return src, err
}

// readLimited reads r to its end, or errTooLarge past the size limit.
func readLimited(r io.Reader) ([]byte, error) {
	src, err := io.ReadAll(io.LimitReader(r, syntax.DefaultMaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(src) > syntax.DefaultMaxSize {
		return nil, errTooLarge{-1}
	}
	return src, nil
}
