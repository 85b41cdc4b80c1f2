package testenv

import (
	"os"
	"strconv"
	"strings"
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
