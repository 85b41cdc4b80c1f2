// Package cli holds personaq's commands. Each command writes to the writers
// it is given and reads no globals, so tests run them in process.
package cli
