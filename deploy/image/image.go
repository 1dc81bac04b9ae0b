package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// The image's user and paths.
const (
	uid, gid   = 65532, 65532
	userName   = "nonroot"
	home       = "/home/nonroot"
	binPath    = "/usr/local/bin/openplaybook"
	dataDir    = "/data" // the chart's volume, the default harness's store
	workDir    = "/work" // the working directory, as in the Dockerfile
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
	listenPort = "7420/tcp" // cli.DefaultListen's port
)

// Options say what [build] puts in the image.
type Options struct {
	// Platforms are the image index's platforms, in order ("linux/amd64",
	// "linux/arm64"). Each needs an entry in Binaries (and, with Node, in
	// Node.Binaries).
	Platforms []string
	// Binaries: platform to the path of a static openplaybook binary
	// (CGO_ENABLED=0) for it, copied to /usr/local/bin/openplaybook.
	Binaries map[string]string
	// Version, Revision and Source are the org.opencontainers.image.*
	// labels and annotations (version, revision, source); Version is also
	// the layout's ref name ("-node" appended for the Node variant).
	Version, Revision, Source string
	// Created is the time of every layer entry, the config's created
	// time and the created label: the commit's time gives the same image
	// digest from the same inputs.
	Created time.Time
	// CACerts is the CA bundle copied to /etc/ssl/certs/ca-certificates.crt
	// (Debian's ca-certificates package writes one at that path).
	CACerts string
	// GzipLevel is the layers' compression level (compress/gzip); 0 is
	// gzip.DefaultCompression.
	GzipLevel int
	// Node, when set, makes the Node variant.
	Node *NodeOptions
}

// NodeOptions say where the Node variant's parts come from.
type NodeOptions struct {
	// Binaries: platform to a node executable for it, copied to
	// /usr/local/bin/node.
	Binaries map[string]string
	// NPM is an npm package directory (its package.json, bin/npm-cli.js,
	// node_modules), copied to /usr/local/lib/node_modules/npm with npm and
	// npx in /usr/local/bin; "" leaves npm out.
	NPM string
	// Shell and Env are the build machine's sh and env executables, copied
	// to /bin/sh and /usr/bin/env: npx runs a package's bin through sh,
	// and those bins start with "#!/usr/bin/env node".
	Shell, Env string
	// LibDirs are the build machine's directories searched for shared
	// libraries, by architecture ("amd64"); nil: /lib/<triplet> and
	// /usr/lib/<triplet>.
	LibDirs map[string][]string
}

// labels are the config's labels and the manifests' annotations.
func (o Options) labels() map[string]string {
	title, desc := "openplaybook", "OpenPlaybook agent playbooks: validate, run and serve (static binary, non-root)"
	if o.Node != nil {
		title, desc = "openplaybook-node", "OpenPlaybook agent playbooks with Node and npm, for MCP servers started with npx (non-root)"
	}
	l := map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": desc,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.url":         o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	for k, v := range l {
		if v == "" {
			delete(l, k)
		}
	}
	return l
}

// refName is the layout's org.opencontainers.image.ref.name of the index.
func (o Options) refName() string {
	v := o.Version
	if v == "" {
		v = "latest"
	}
	if o.Node != nil {
		v += "-node"
	}
	return v
}

// build writes the image index of o as an OCI image layout in dir
// (which must not exist or be empty) and returns it. The index holds
// one image per platform; each image is a base layer (/etc/passwd and
// /etc/group with root and nonroot, the CA bundle, /home/nonroot,
// /data, /work and /tmp), the binary's layer and, for the Node variant,
// a layer with node, npm, sh, env and the shared libraries they need.
func build(dir string, o Options) (v1.ImageIndex, error) {
	if len(o.Platforms) == 0 {
		return nil, errors.New("no platform")
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s: not empty (an image layout is written into an empty directory)", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if o.GzipLevel == 0 {
		o.GzipLevel = gzip.DefaultCompression
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		img, plat, err := o.image(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: plat},
		})
	}
	idx = mutate.Annotations(idx, o.labels()).(v1.ImageIndex)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.refName(),
	})); err != nil {
		return nil, err
	}
	return idx, nil
}

// image is the image of one platform ("linux/amd64").
func (o Options) image(platform string) (v1.Image, *v1.Platform, error) {
	osName, archName, ok := strings.Cut(platform, "/")
	a, known := arches[archName]
	if !ok || osName != "linux" || !known {
		return nil, nil, fmt.Errorf("platform %q: want linux/amd64 or linux/arm64", platform)
	}
	plat := &v1.Platform{OS: "linux", Architecture: archName}
	if archName == "arm64" {
		plat.Variant = "v8"
	}
	bin := o.Binaries[platform]
	if bin == "" {
		return nil, nil, errors.New("no openplaybook binary")
	}
	if info, err := readELF(bin); err != nil {
		return nil, nil, err
	} else if info.machine != a.machine || info.interp != "" || len(info.needed) > 0 {
		return nil, nil, fmt.Errorf("%s: want a static ELF file for %v (CGO_ENABLED=0), got one for %v with interpreter %q and libraries %q", bin, a.machine, info.machine, info.interp, info.needed)
	}

	base := tree{}
	base.file("/etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", userName, uid, gid, userName, home))
	base.file("/etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", userName, gid))
	if o.CACerts == "" {
		return nil, nil, errors.New("no CA bundle")
	}
	if _, err := os.Stat(o.CACerts); err != nil {
		return nil, nil, fmt.Errorf("CA bundle: %w", err)
	}
	base.copy(caBundle, 0o644, o.CACerts)
	base.dir("/root", 0o700, 0, 0)
	base.dir(home, 0o700, uid, gid)
	base.dir(dataDir, 0o700, uid, gid)
	base.dir(workDir, 0o755, uid, gid)
	base.dir("/tmp", 0o1777, 0, 0)
	binary := tree{}
	binary.copy(binPath, 0o755, bin)

	layers := []struct {
		t       tree
		comment string
	}{
		{base, "base: /etc/passwd, /etc/group, CA certificates, /home/nonroot, /data, /work, /tmp"},
		{binary, "openplaybook " + o.Version + " (static)"},
	}
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"SSL_CERT_FILE=" + caBundle,
	}
	if o.Node != nil {
		t, comment, err := o.Node.layer(platform, a)
		if err != nil {
			return nil, nil, err
		}
		layers = append(layers, struct {
			t       tree
			comment string
		}{t, comment})
		// /home/nonroot is read-only under the chart's
		// readOnlyRootFilesystem; /tmp is a volume there.
		env = append(env, "npm_config_cache=/tmp/.npm", "npm_config_update_notifier=false", "NODE_EXTRA_CA_CERTS="+caBundle)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		layer, err := l.t.layer(o.Created, o.GzipLevel)
		if err != nil {
			return nil, nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History: v1.History{
				Created:   v1.Time{Time: o.Created},
				CreatedBy: "go run ./deploy/image",
				Comment:   l.comment,
			},
		})
		if err != nil {
			return nil, nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: o.Created}
	cf.Author = ""
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", uid, gid),
		Entrypoint:   []string{binPath},
		Cmd:          []string{"--help"},
		WorkingDir:   workDir,
		Env:          env,
		Labels:       o.labels(),
		ExposedPorts: map[string]struct{}{listenPort: {}},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, nil, err
	}
	return mutate.Annotations(img, o.labels()).(v1.Image), plat, nil
}

// layer is the Node variant's layer for platform.
func (n *NodeOptions) layer(platform string, a arch) (tree, string, error) {
	node := n.Binaries[platform]
	if node == "" {
		return nil, "", errors.New("no node binary")
	}
	if n.Shell == "" || n.Env == "" {
		return nil, "", errors.New("no sh or env executable")
	}
	dirs := n.LibDirs[a.deb]
	if dirs == nil {
		dirs = []string{"/lib/" + a.triplet, "/usr/lib/" + a.triplet}
	}
	t := tree{}
	copied, err := closure(t, a, dirs, map[string]string{
		"/usr/local/bin/node": node,
		"/bin/sh":             n.Shell,
		"/usr/bin/env":        n.Env,
	})
	if err != nil {
		return nil, "", err
	}
	var system []hostFile
	for _, f := range copied {
		if f.dst != "/usr/local/bin/node" {
			system = append(system, f)
		}
	}
	pkgs, err := debianPackages(t, system)
	if err != nil {
		return nil, "", err
	}
	comment := "node"
	if n.NPM != "" {
		for _, f := range []string{"bin/npm-cli.js", "node_modules"} {
			// npm's own package bundles its dependencies in node_modules;
			// Debian's npm package spreads them over /usr/share/nodejs.
			if _, err := os.Stat(filepath.Join(n.NPM, f)); err != nil {
				return nil, "", fmt.Errorf("npm: want a self-contained npm package directory (npm's package, with its dependencies in node_modules): %w", err)
			}
		}
		const npmDir = "/usr/local/lib/node_modules/npm"
		if err := t.copyDir(npmDir, n.NPM); err != nil {
			return nil, "", err
		}
		for _, js := range []string{"npm-cli.js", "npx-cli.js"} {
			e, ok := t[npmDir+"/bin/"+js]
			if !ok {
				return nil, "", fmt.Errorf("npm: no bin/%s", js)
			}
			e.mode = 0o755
			t[npmDir+"/bin/"+js] = e
		}
		t.symlink("/usr/local/bin/npm", "../lib/node_modules/npm/bin/npm-cli.js")
		t.symlink("/usr/local/bin/npx", "../lib/node_modules/npm/bin/npx-cli.js")
		comment += ", npm"
	}
	comment += ", sh, env and shared libraries from Debian packages " + strings.Join(slices.Compact(pkgs), " ")
	return t, comment, nil
}
