package testenv

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcStatus reads a kB field of /proc/<pid>/status in bytes, pid "self"
// for the calling process: VmRSS (the resident set now) or VmHWM (its
// peak). It is 0 where there is no such process, field or /proc.
func ProcStatus(pid, field string) uint64 {
	raw, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest) // "123456 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// ProcCPU is the CPU time (user + system, all threads) process pid has
// used so far, from /proc/<pid>/stat; 0 when it cannot be read.
func ProcCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if i < 0 || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[14-3], 10, 64)
	stime, _ := strconv.ParseInt(f[15-3], 10, 64)
	// Clock ticks: sysconf(_SC_CLK_TCK) is 100 on Linux on every
	// architecture Go supports.
	return time.Duration(utime+stime) * (time.Second / 100)
}
