package providers_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// errCannotTell: this system has no /proc/net/tcp, so who listens on a
// port cannot be told.
var errCannotTell = errors.New("no /proc/net/tcp: cannot tell which process listens on a port")

// reachable are the local addresses of /proc/net/tcp{,6} a client of
// 127.0.0.1 reaches: 127.0.0.1, 0.0.0.0, ::, ::1, ::ffff:127.0.0.1.
var reachable = map[string]bool{
	"0100007F": true, "00000000": true, "00000000000000000000000000000000": true,
	"00000000000000000000000001000000": true, "0000000000000000FFFF00000100007F": true,
}

// listenerOwned reports whether something listens on 127.0.0.1:port and
// every such listening socket is held by a process of the process group
// pgid (the mock the test started, with its children): false with a nil
// error when nothing listens yet, an error naming the socket when one is
// held by no process of the group (something else took the port).
func listenerOwned(port, pgid int) (bool, error) {
	inodes := map[string]bool{}
	found := false
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			if f == "/proc/net/tcp" {
				return false, errCannotTell
			}
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "0A" { // 0A: LISTEN
				continue
			}
			addr, p, ok := strings.Cut(fs[1], ":")
			if n, err := strconv.ParseUint(p, 16, 16); ok && err == nil && int(n) == port && reachable[addr] {
				inodes[fs[9]] = true
				found = true
			}
		}
		fh.Close()
	}
	if !found {
		return false, nil
	}
	held := map[string]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold blanks and parens.
		rest := string(stat)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		if fs := strings.Fields(rest); len(fs) < 3 || fs[2] != strconv.Itoa(pgid) {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
			if ino, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
				held[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	for ino := range inodes {
		if !held[ino] {
			return false, fmt.Errorf("127.0.0.1:%d is listened on by a process that is not the mock (socket inode %s)", port, ino)
		}
	}
	return true, nil
}

// TestListenerOwned: a listener counts as the mock's only when its process
// group holds the socket: the test's own listener is its group's, not
// group 1's, and a closed port has none.
func TestListenerOwned(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip(errCannotTell)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if ok, err := listenerOwned(port, syscall.Getpgrp()); !ok || err != nil {
		t.Errorf("the test's own listener: %v, %v; want true, nil", ok, err)
	}
	if ok, err := listenerOwned(port, 1); ok || err == nil || !strings.Contains(err.Error(), "not the mock") {
		t.Errorf("another group's listener: %v, %v; want false and an error", ok, err)
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	free := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	if ok, err := listenerOwned(free, syscall.Getpgrp()); ok || err != nil {
		t.Errorf("a closed port: %v, %v; want false, nil", ok, err)
	}
}
