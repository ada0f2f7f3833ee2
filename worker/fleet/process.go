package fleet

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// proc names a process: its host, boot and pid (see Card.Host).
type proc struct {
	host, bootID string
	pid          int
}

// bootIDFile holds a random id the kernel draws at each boot (Linux).
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// thisProcess is the process running this code.
func thisProcess() proc {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile(bootIDFile)
	return proc{host: printable(host), bootID: printable(strings.TrimSpace(string(boot))), pid: os.Getpid()}
}

// processAlive reports whether pid may be a live process of this host:
// false only when it provably is not (no such process, or a zombie).
func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) state ...": comm may hold anything, parentheses included.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	return stat[i+2] != 'Z' && stat[i+2] != 'X'
}
