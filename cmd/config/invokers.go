package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// CheckInvokers reports, joined, every persona whose invoker cannot run on
// this machine, each a *FieldError wrapping ErrInvalid that names the
// field: a command path that does not exist, is not a regular file or is
// not executable (looked up in PATH when it has no slash, relative to the
// invoker's dir otherwise). `config check` and `serve` call it at start, so
// a persona that could never run fails there, not on every request. HTTP
// URLs are checked by Validate; whether the endpoint answers is not checked
// (it may start after personaq).
func (f *File) CheckInvokers() error {
	var probs problems
	for _, name := range slices.Sorted(maps.Keys(f.PersonaConfigs)) {
		iv := f.PersonaConfigs[name].Invoker
		if iv.Type != InvokerCommand || iv.Path == "" {
			continue
		}
		if msg := commandProblem(iv.Path, iv.Dir); msg != "" {
			probs.add(join("personas."+name, "invoker.path"), "%s", msg)
		}
	}
	return probs.err()
}

// commandProblem says why path cannot be run (empty: it can).
func commandProblem(path, dir string) string {
	if !strings.ContainsRune(path, filepath.Separator) && !strings.ContainsRune(path, '/') {
		if _, err := exec.LookPath(path); err != nil {
			return fmt.Sprintf("command %q not found in PATH (%s)", path, os.Getenv("PATH"))
		}
		return ""
	}
	full := path
	if !filepath.IsAbs(full) && dir != "" {
		full = filepath.Join(dir, path)
	}
	info, err := os.Stat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("command %q does not exist", full)
	case err != nil:
		return fmt.Sprintf("command %q cannot be read: %v", full, err)
	case !info.Mode().IsRegular():
		return fmt.Sprintf("command %q is not a regular file (%s)", full, info.Mode().Type())
	case info.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf("command %q is not executable (mode %s; chmod +x it)", full, info.Mode().Perm())
	}
	return ""
}
