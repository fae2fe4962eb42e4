// Package procstat reads what Linux's /proc says of a process: the CPU
// time it has used, its resident memory, and which process is the local
// MariaDB server. The benchmark and the tests that measure cost or
// memory share it.
package procstat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ClockTick is the unit of /proc's CPU times (USER_HZ): 100 per second
// on every Linux this runs on (getconf CLK_TCK).
const ClockTick = 10 * time.Millisecond

// Self names the calling process.
const Self = 0

// path is /proc/<pid>/name, or /proc/self/name for Self.
func path(pid int, name string) string {
	if pid == Self {
		return "/proc/self/" + name
	}
	return fmt.Sprintf("/proc/%d/%s", pid, name)
}

// CPU is the user + system CPU time pid has used so far, from
// /proc/<pid>/stat (utime and stime, fields 14 and 15).
func CPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(path(pid, "stat"))
	if err != nil {
		return 0, err
	}
	return ParseStat(string(raw))
}

// ParseStat reads utime + stime from one /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces or
// parentheses itself, so the fields are counted after its last ')'.
func ParseStat(line string) (time.Duration, error) {
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return 0, errors.New("procstat: stat line without a command name")
	}
	f := strings.Fields(line[end+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("procstat: stat line too short")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("procstat: stat times: %w", err)
	}
	return time.Duration(utime+stime) * ClockTick, nil
}

// RSS is pid's resident set size in bytes, from /proc/<pid>/status.
func RSS(pid int) (int64, error) {
	raw, err := os.ReadFile(path(pid, "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("procstat: no VmRSS in " + path(pid, "status"))
}

// MariaDB is the pid of the one process on this machine named mariadbd
// (or mysqld). A server elsewhere, or two of them, is an error: its CPU
// cannot be told apart.
func MariaDB() (int, error) {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	found := 0
	for _, d := range dirs {
		comm, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		if name := strings.TrimSpace(string(comm)); name == "mariadbd" || name == "mysqld" {
			if found != 0 {
				return 0, errors.New("procstat: more than one MariaDB server on this machine")
			}
			found, _ = strconv.Atoi(filepath.Base(filepath.Dir(d)))
		}
	}
	if found == 0 {
		return 0, errors.New("procstat: no MariaDB server on this machine")
	}
	return found, nil
}
