package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// entry is one file, directory or symbolic link of a layer.
type entry struct {
	typ      byte   // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	mode     int64  // permission bits (with the sticky bit for /tmp)
	uid, gid int    // owner
	data     []byte // a regular file's content, when src is ""
	src      string // a regular file's content: the path of a file on the build machine
	link     string // a symbolic link's target
}

// tree is a layer's content by absolute path ("/etc/passwd"). Parent
// directories that are not entries are written as root-owned 0755.
type tree map[string]entry

func (t tree) dir(p string, mode int64, uid, gid int) {
	t[p] = entry{typ: tar.TypeDir, mode: mode, uid: uid, gid: gid}
}
func (t tree) file(p string, mode int64, data []byte) {
	t[p] = entry{typ: tar.TypeReg, mode: mode, data: data}
}
func (t tree) copy(p string, mode int64, src string) {
	t[p] = entry{typ: tar.TypeReg, mode: mode, src: src}
}
func (t tree) symlink(p, target string) {
	t[p] = entry{typ: tar.TypeSymlink, mode: 0o777, link: target}
}

// copyDir adds the directory src of the build machine at p: its
// directories 0755, its files 0755 when any execute bit is set, else
// 0644, its symbolic links as they are; all owned by root. npm
// configuration files (".npmrc" anywhere, "npmrc" at src's top: npm's
// builtin config), which may hold a registry token of the build machine,
// are left out.
func (t tree) copyDir(p, src string) error {
	return filepath.WalkDir(src, func(f string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, f)
		if err != nil {
			return err
		}
		if !d.IsDir() && (d.Name() == ".npmrc" || rel == "npmrc") {
			return nil
		}
		dst := path.Join(p, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			t.dir(dst, 0o755, 0, 0)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(f)
			if err != nil {
				return err
			}
			t.symlink(dst, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := int64(0o644)
			if info.Mode()&0o111 != 0 {
				mode = 0o755
			}
			t.copy(dst, mode, f)
		default:
			return fmt.Errorf("%s: not a file, directory or symbolic link", f)
		}
		return nil
	})
}

// layer writes t as a gzip-compressed tar at the given level, entries in
// path order, every time mtime and no user or group names, so the same
// tree gives the same digest. The layer is an OCI layer
// (application/vnd.oci.image.layer.v1.tar+gzip).
func (t tree) layer(mtime time.Time, level int) (v1.Layer, error) {
	all := map[string]entry{}
	for p, e := range t {
		if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
			return nil, fmt.Errorf("layer path %q: want an absolute, clean path", p)
		}
		all[p] = e
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				if _, ok := t[d]; !ok {
					all[d] = entry{typ: tar.TypeDir, mode: 0o755}
				}
			}
		}
	}
	for p := range all {
		if e, ok := all[path.Dir(p)]; ok && e.typ != tar.TypeDir {
			return nil, fmt.Errorf("layer path %q: its parent is not a directory", p)
		}
	}
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range all {
			if !yield(p) {
				return
			}
		}
	})
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, p := range paths {
		e := all[p]
		h := &tar.Header{
			Typeflag: e.typ,
			Name:     strings.TrimPrefix(p, "/"),
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			ModTime:  mtime,
			Linkname: e.link,
			Format:   tar.FormatPAX,
		}
		var body io.Reader
		var file *os.File
		switch e.typ {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeReg:
			if e.src == "" {
				h.Size = int64(len(e.data))
				body = bytes.NewReader(e.data)
			} else {
				f, err := os.Open(e.src)
				if err != nil {
					return nil, err
				}
				file = f
				info, err := f.Stat()
				if err != nil {
					f.Close()
					return nil, err
				}
				if !info.Mode().IsRegular() {
					f.Close()
					return nil, fmt.Errorf("%s: not a regular file", e.src)
				}
				h.Size = info.Size()
				body = f
			}
		}
		err := tw.WriteHeader(h)
		if err == nil && body != nil {
			var n int64
			if n, err = io.Copy(tw, body); err == nil && n != h.Size {
				err = fmt.Errorf("changed while it was read")
			}
		}
		if file != nil {
			file.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	blob := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
