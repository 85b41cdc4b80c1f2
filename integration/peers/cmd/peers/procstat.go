package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is the unit of /proc/<pid>/stat's times (sysconf(_SC_CLK_TCK),
// 100 on Linux on every architecture Go supports).
const clockTicks = 100

// procStat holds the fields of /proc/<pid>/stat the CPU accounting needs.
type procStat struct {
	ppid           int
	utime, stime   float64 // seconds, all threads
	cutime, cstime float64 // seconds, waited-for children
	ok             bool
}

func readProcStat(pid int) procStat {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}
	}
	num := func(k int) float64 { // k: the field's number in proc(5)
		v, _ := strconv.ParseFloat(f[k-3], 64)
		return v / clockTicks
	}
	ppid, _ := strconv.Atoi(f[4-3])
	return procStat{ppid: ppid, utime: num(14), stime: num(15), cutime: num(16), cstime: num(17), ok: true}
}

// serversCPU is the CPU time (user+sys, seconds) of each of the given
// server processes, in their order: its own threads, its children still
// running (the PostgreSQL backends and background processes under the
// postmaster) and the children it has already waited for (cutime+cstime).
func serversCPU(pids []int) []float64 {
	if len(pids) == 0 {
		return nil
	}
	each := make([]float64, len(pids))
	index := make(map[int]int, len(pids))
	for i, pid := range pids {
		index[pid] = i
		st := readProcStat(pid)
		each[i] = st.utime + st.stime + st.cutime + st.cstime
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st := readProcStat(pid); st.ok {
			if i, ok := index[st.ppid]; ok {
				each[i] += st.utime + st.stime
			}
		}
	}
	return each
}
