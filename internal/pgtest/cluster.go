//go:build unix

package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startTimeout bounds initdb and pg_ctl start (each about a second on an
// idle machine; generous for a loaded CI runner). stopTimeout bounds
// pg_ctl stop and the wait for the postmaster to exit.
const (
	startTimeout = 2 * time.Minute
	stopTimeout  = time.Minute
)

// portAttempts is how often the cluster is started on another free port
// when the one picked was taken in between (another process bound it after
// freePort closed its listener).
const portAttempts = 5

// cluster is a throwaway PostgreSQL cluster: dir holds the data directory
// (data), the unix socket and the server log (postgres.log).
type cluster struct {
	bin  string // directory of initdb, pg_ctl and postgres
	dir  string
	data string
	port int
	pid  int                 // the postmaster's pid
	cred *syscall.Credential // the "postgres" user when run as root; nil otherwise

	durable bool // fsync and full_page_writes on (see [NewCluster])

	sentinel *os.File  // write end of the watcher's stdin
	watcher  *exec.Cmd // stops the postmaster and removes dir if the test binary dies
}

// fixedDirs are the directories binDir looks in after pg_config's and
// before PATH (a variable so a test can take Debian's away).
var fixedDirs = []string{"/usr/lib/postgresql/15/bin"}

// binDir finds the directory holding initdb and pg_ctl: `pg_config
// --bindir`, /usr/lib/postgresql/15/bin, then the directories of initdb
// and pg_ctl on PATH (symlinks resolved, since pg_ctl finds postgres beside
// itself). The error, wrapping errUnavailable, lists where it looked.
func binDir() (string, error) {
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	dirs = append(dirs, fixedDirs...)
	for _, name := range []string{"initdb", "pg_ctl"} {
		if p, err := exec.LookPath(name); err == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	looked := "found none of them"
	if len(dirs) > 0 {
		looked = "looked in " + strings.Join(dirs, ", ")
	}
	return "", fmt.Errorf("%w: no initdb, pg_ctl and postgres together in `pg_config --bindir`, /usr/lib/postgresql/15/bin or on PATH (%s)", errUnavailable, looked)
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// serverUser returns the credential to run the server with: nil when the
// process is not root, the "postgres" OS user's when it is (initdb and
// postgres refuse to run as root).
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root, and PostgreSQL refuses root, but there is no \"postgres\" OS user to run it as: %v", errUnavailable, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("the \"postgres\" OS user has uid %q, gid %q: want numbers", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// startCluster makes and starts the package's cluster; on error nothing
// is left.
func startCluster() (*cluster, error) { return newCluster(false) }

// newCluster makes and starts a cluster, durable or not; on error nothing
// is left.
func newCluster(durable bool) (_ *cluster, err error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	base := os.TempDir()
	// A unix socket path is at most 107 bytes; keep room for
	// "/pgtest-NNNNNNNNNN/.s.PGSQL.NNNNN.lock".
	if len(base) > 60 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "pgtest-")
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), cred: cred, durable: durable}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	if err := c.startWatcher(); err != nil {
		return nil, fmt.Errorf("start the watcher: %v", err)
	}
	if out, err := c.run("initdb", "-D", c.data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := c.configure(); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		retry, err := c.start()
		if err == nil {
			break
		}
		if !retry || attempt == portAttempts {
			return nil, err
		}
	}
	return c, nil
}

// configure replaces pg_hba.conf (trust for the unix socket and
// 127.0.0.1 only) and appends the test settings to postgresql.conf. fsync
// is off: the cluster is thrown away, and a killed server process loses
// nothing by it (the OS still holds the writes); only an OS crash would.
func (c *cluster) configure() error {
	hba := "# pgtest: trust, on the unix socket and loopback only\n" +
		"local all all trust\n" +
		"host  all all 127.0.0.1/32 trust\n"
	if err := os.WriteFile(filepath.Join(c.data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return err
	}
	conf := "\n# pgtest\n" +
		"listen_addresses = '127.0.0.1'\n" +
		"unix_socket_directories = '" + strings.ReplaceAll(c.dir, "'", "''") + "'\n" +
		"fsync = off\n" +
		"full_page_writes = off\n" +
		"max_connections = 200\n" +
		"shared_buffers = 32MB\n"
	if c.durable {
		conf += "fsync = on\nfull_page_writes = on\n"
	}
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// start runs pg_ctl -w start on a free port. retry reports that the port
// was taken and another one may do.
func (c *cluster) start() (retry bool, err error) {
	port, err := pickPort()
	if err != nil {
		return false, err
	}
	return c.startOn(port)
}

// startOn runs pg_ctl -w start on port.
func (c *cluster) startOn(port int) (retry bool, err error) {
	logPath := filepath.Join(c.dir, "postgres.log")
	var off int64
	if fi, err := os.Stat(logPath); err == nil {
		off = fi.Size()
	}
	out, err := c.run("pg_ctl", "-D", c.data, "-l", logPath, "-w", "-t", strconv.Itoa(int(startTimeout/time.Second)),
		"-o", "-p "+strconv.Itoa(port), "start")
	if err != nil {
		log := readFrom(logPath, off)
		inUse := strings.Contains(log, "Address already in use") || strings.Contains(log, "could not create any TCP/IP sockets")
		return inUse, fmt.Errorf("pg_ctl start on 127.0.0.1:%d: %v\n%s\nserver log:\n%s", port, err, out, log)
	}
	c.port = port
	pid, err := c.postmasterPID()
	if err != nil {
		return false, err
	}
	c.pid = pid
	return false, nil
}

// url is the superuser's URL over TCP on loopback.
func (c *cluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// postmasterPID reads the first line of postmaster.pid.
func (c *cluster) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("postmaster.pid: first line %q is not a pid", line)
	}
	return pid, nil
}

// stop shuts the server down (pg_ctl stop -m fast; SIGQUIT to the
// postmaster when that fails), waits for the postmaster to exit, removes
// the directory and lets the watcher go. It is safe on a half-made
// cluster.
func (c *cluster) stop() error {
	var errs []error
	if c.pid == 0 {
		// A start that failed half-way may still have left a postmaster.
		if pid, err := c.postmasterPID(); err == nil {
			c.pid = pid
		}
	}
	if c.pid != 0 {
		if out, err := c.run("pg_ctl", "-D", c.data, "-m", "fast", "-w",
			"-t", strconv.Itoa(int(stopTimeout/time.Second)), "stop"); err != nil {
			errs = append(errs, fmt.Errorf("pg_ctl stop: %v\n%s", err, out))
			_ = syscall.Kill(c.pid, syscall.SIGQUIT)
		}
		deadline := time.Now().Add(stopTimeout)
		for alive(c.pid) {
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("postmaster %d still running %v after the stop", c.pid, stopTimeout))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	if c.sentinel != nil {
		// "done": the watcher exits without touching anything.
		_, _ = c.sentinel.WriteString("done\n")
		c.sentinel.Close()
		_ = c.watcher.Wait()
	}
	return errors.Join(errs...)
}

// watchScript runs in the watcher (sh, its own process group, so a ^C
// to the test's group does not kill it first). It reads its stdin, a pipe
// whose only write end the test binary holds: "done" means the cluster was
// stopped; end of file means the test binary died, so it sends the
// postmaster SIGQUIT (immediate shutdown), waits up to 30 s for it to go
// and removes the directory. ($1: data directory, $2: the directory.) A
// postmaster slower than that (its pid file gone with the directory) shuts
// itself down when it next rechecks its pid file, within about a minute.
// Only a watcher killed as well leaves the cluster behind.
const watchScript = `read -r line
[ "$line" = done ] && exit 0
pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null)
case $pid in
''|*[!0-9]*) ;;
*)
	kill -QUIT "$pid" 2>/dev/null
	i=0
	while [ $i -lt 300 ] && kill -0 "$pid" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	;;
esac
rm -rf "$2"
`

func (c *cluster) startWatcher() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", "-c", watchScript, "pgtest-watcher", c.data, c.dir)
	cmd.Stdin = r // stdout and stderr: /dev/null, so go test does not wait for it
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	r.Close()
	c.sentinel, c.watcher = w, cmd
	return nil
}

// run runs one of the cluster's programs as the server's user and
// returns its combined output.
func (c *cluster) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// Its own process group: a ^C to the test's group leaves the server to
	// Main or the watcher. Credential: the "postgres" user when root.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	// pg_ctl's postmaster writes to the log file, not to our pipe; should a
	// child keep the pipe open anyway, do not wait for it.
	cmd.WaitDelay = 10 * time.Second
	return cmd.CombinedOutput()
}

// pickPort is freePort; a variable so a test can hand out a taken port.
var pickPort = freePort

// freePort asks the kernel for a free port on 127.0.0.1. Another process
// may bind it before the server does; [cluster.start] then reports retry.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// readFrom returns the file's text from offset off (for the server log of
// one start attempt).
func readFrom(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}

// alive reports whether pid is a running process: on Linux, /proc/PID
// exists and is not a zombie (an orphaned postmaster is reaped by whatever
// adopts it, which may be slow to); elsewhere, kill(pid, 0) succeeds.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, err := os.Stat("/proc/self/stat"); err == nil {
				return false
			}
		}
		return syscall.Kill(pid, 0) == nil
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return true
	}
	f := strings.Fields(string(b[i+1:]))
	return len(f) == 0 || (f[0] != "Z" && f[0] != "X")
}
