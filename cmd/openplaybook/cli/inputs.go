package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// errTooLarge reports a document larger than the size limit, which is
// not read into memory at all. size is -1 when only "more than limit" is
// known (standard input).
type errTooLarge struct {
	size  int64
	limit int
}

func (e errTooLarge) Error() string {
	limit := fmt.Sprintf("%d bytes", e.limit)
	if f := formatSize(e.limit); f != strconv.Itoa(e.limit) {
		limit += " (" + f + ")"
	}
	if e.size < 0 {
		return fmt.Sprintf("document is more than %d bytes; the limit is %s, raise it with --max-size", e.limit, limit)
	}
	return fmt.Sprintf("document is %d bytes; the limit is %s, raise it with --max-size", e.size, limit)
}

// orDefault is limit, or syntax.DefaultMaxSize when limit is 0.
func orDefault(limit int) int {
	if limit <= 0 {
		return syntax.DefaultMaxSize
	}
	return limit
}

// readFile reads a document from a file, refusing (with errTooLarge)
// one over limit bytes (0: syntax.DefaultMaxSize) before reading it. A
// regular file is read into a buffer of its size, so the document is in
// memory once, without the copies of a growing buffer.
func readFile(path string, limit int) ([]byte, error) {
	limit = orDefault(limit)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var src []byte
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if fi.Size() > int64(limit) {
			return nil, errTooLarge{fi.Size(), limit}
		}
		// One byte more than the size, so that reading to EOF needs no
		// larger buffer (and a file that grew is still bounded below).
		src = make([]byte, 0, fi.Size()+1)
	}
	src, err = readLimited(f, src, limit)
	if err != nil && !errors.As(err, new(errTooLarge)) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return src, err
}

// readStdin reads a document from standard input, or errTooLarge past
// limit bytes (0: syntax.DefaultMaxSize).
func (c *CLI) readStdin(limit int) ([]byte, error) {
	src, err := readLimited(c.stdin(), nil, orDefault(limit))
	if err != nil && !errors.As(err, new(errTooLarge)) {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return src, err
}

// readLimited appends r's bytes to buf up to its end, or returns
// errTooLarge past limit bytes.
func readLimited(r io.Reader, buf []byte, limit int) ([]byte, error) {
	lr := &io.LimitedReader{R: r, N: int64(limit) + 1}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(buf) > limit {
		return nil, errTooLarge{-1, limit}
	}
	return buf, nil
}
