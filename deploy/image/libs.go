package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// arch is what the image builder knows of one Linux architecture.
type arch struct {
	machine elf.Machine
	triplet string // Debian's multiarch directory name
	deb     string // Debian's architecture name
}

var arches = map[string]arch{
	"amd64": {elf.EM_X86_64, "x86_64-linux-gnu", "amd64"},
	"arm64": {elf.EM_AARCH64, "aarch64-linux-gnu", "arm64"},
}

// elfInfo is what the dynamic loader needs of one ELF file: its
// machine, its interpreter (PT_INTERP, "" for a static file) and the
// shared libraries it names (DT_NEEDED).
type elfInfo struct {
	machine elf.Machine
	interp  string
	needed  []string
}

func readELF(file string) (elfInfo, error) {
	f, err := elf.Open(file)
	if err != nil {
		return elfInfo{}, fmt.Errorf("%s: %w", file, err)
	}
	defer f.Close()
	info := elfInfo{machine: f.Machine}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return elfInfo{}, fmt.Errorf("%s: PT_INTERP: %w", file, err)
			}
			info.interp = string(bytes.TrimRight(b, "\x00"))
		}
	}
	info.needed, err = f.ImportedLibraries()
	if err != nil {
		return elfInfo{}, fmt.Errorf("%s: DT_NEEDED: %w", file, err)
	}
	return info, nil
}

// hostFile is a file copied from the build machine into the image.
type hostFile struct {
	src string // the path on the build machine, as found
	dst string // the path in the image
}

// closure adds to t the executables exes (image path to build-machine
// path) and every shared library they need, transitively, found in
// libDirs of the build machine and copied to /lib/<triplet>/<soname>,
// with the interpreter at its PT_INTERP path (a symbolic link to the
// copy in /lib/<triplet> when the interpreter is also needed as a
// library, as libc needs it). Every file must be an ELF file of a's
// machine; a library not found in libDirs is an error. It returns the
// files copied, for their provenance.
func closure(t tree, a arch, libDirs []string, exes map[string]string) ([]hostFile, error) {
	var copied []hostFile
	libDir := "/lib/" + a.triplet
	done := map[string]bool{}
	var queue []string
	interps := map[string]bool{}
	add := func(src string, info elfInfo) error {
		if info.machine != a.machine {
			return fmt.Errorf("%s: an ELF file for %v, want %v", src, info.machine, a.machine)
		}
		if info.interp != "" {
			interps[info.interp] = true
		}
		for _, n := range info.needed {
			if !done[n] {
				done[n] = true
				queue = append(queue, n)
			}
		}
		return nil
	}
	for _, dst := range slices.Sorted(func(yield func(string) bool) {
		for k := range exes {
			if !yield(k) {
				return
			}
		}
	}) {
		src := exes[dst]
		info, err := readELF(src)
		if err != nil {
			return nil, err
		}
		if err := add(src, info); err != nil {
			return nil, err
		}
		t.copy(dst, 0o755, src)
		copied = append(copied, hostFile{src, dst})
	}
	for len(queue) > 0 {
		soname := queue[0]
		queue = queue[1:]
		if strings.Contains(soname, "/") {
			return nil, fmt.Errorf("DT_NEEDED %q: a path, not a library name", soname)
		}
		var src string
		for _, d := range libDirs {
			if fi, err := os.Stat(filepath.Join(d, soname)); err == nil && fi.Mode().IsRegular() {
				src = filepath.Join(d, soname)
				break
			}
		}
		if src == "" {
			return nil, fmt.Errorf("shared library %s: not in %s", soname, strings.Join(libDirs, ", "))
		}
		info, err := readELF(src)
		if err != nil {
			return nil, err
		}
		if err := add(src, info); err != nil {
			return nil, err
		}
		t.copy(path.Join(libDir, soname), 0o755, src)
		copied = append(copied, hostFile{src, path.Join(libDir, soname)})
	}
	for interp := range interps {
		if !path.IsAbs(interp) {
			return nil, fmt.Errorf("interpreter %q: not an absolute path", interp)
		}
		lib := path.Join(libDir, path.Base(interp))
		if _, ok := t[lib]; !ok {
			return nil, fmt.Errorf("interpreter %s: not among the libraries needed (want %s)", interp, path.Base(interp))
		}
		if interp != lib {
			rel, err := filepath.Rel(path.Dir(interp), lib)
			if err != nil {
				return nil, err
			}
			t.symlink(interp, filepath.ToSlash(rel))
		}
	}
	return copied, nil
}

// debianPackages adds to t, for every Debian package that owns one of
// files (dpkg-query -S), its status stanza at
// /var/lib/dpkg/status.d/<package> (where scanners such as syft and
// trivy look in distroless images) and its copyright file at
// /usr/share/doc/<package>/copyright. A file that no package owns is
// an error: the image says where each of its build-machine files came
// from.
func debianPackages(t tree, files []hostFile) ([]string, error) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		return nil, errors.New("dpkg-query is not on PATH: the Node variant is built on Debian (or a derivative), whose packages supply its shared libraries, sh and env")
	}
	pkgs := map[string]bool{}
	for _, f := range files {
		var owner string
		var cands []string
		if r, err := filepath.EvalSymlinks(f.src); err == nil && r != f.src {
			cands = append(cands, r)
		}
		cands = append(cands, f.src)
		// Debian 12 merges /lib into /usr/lib, but dpkg records a library
		// under the name it was packaged with: try both.
		for _, c := range slices.Clone(cands) {
			if rest, ok := strings.CutPrefix(c, "/usr/lib/"); ok {
				cands = append(cands, "/lib/"+rest)
			} else if rest, ok := strings.CutPrefix(c, "/lib/"); ok {
				cands = append(cands, "/usr/lib/"+rest)
			}
		}
		for _, c := range cands {
			out, err := exec.Command("dpkg-query", "-S", c).Output()
			if err != nil {
				continue
			}
			// "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6", after any
			// "diversion by ..." lines.
			for _, line := range strings.Split(string(out), "\n") {
				if pkg, _, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "diversion ") && !strings.Contains(pkg, " ") {
					owner = pkg
					break
				}
			}
			if owner != "" {
				break
			}
		}
		if owner == "" {
			return nil, fmt.Errorf("%s: no Debian package owns it (dpkg-query -S)", f.src)
		}
		pkgs[owner] = true
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for p := range pkgs {
			if !yield(p) {
				return
			}
		}
	})
	for _, p := range names {
		status, err := exec.Command("dpkg-query", "-s", p).Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg-query -s %s: %w", p, err)
		}
		name, _, _ := strings.Cut(p, ":")
		t.file("/var/lib/dpkg/status.d/"+name, 0o644, status)
		copyright := "/usr/share/doc/" + name + "/copyright"
		if _, err := os.Stat(copyright); err != nil {
			return nil, fmt.Errorf("package %s: its copyright file: %w", p, err)
		}
		t.copy(copyright, 0o644, copyright)
	}
	return names, nil
}
