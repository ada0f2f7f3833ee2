package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"svc/worker/config"
)

func cmdCheck(args []string, stdout io.Writer) error {
	f, err := parseFlags("check", args, stdout)
	if err != nil {
		return err
	}
	if f.config == "" {
		return errors.New("-config FILE is required")
	}
	cfg, err := config.LoadFile(f.config)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# %s: OK\n", f.config)
	fmt.Fprintln(stdout, "# The effective config: every default filled in. Each secret is replaced by a")
	fmt.Fprintln(stdout, "# ${SVC_...} reference; set those variables to load this output back.")
	if keys := cfg.InactiveKeys(); len(keys) > 0 {
		fmt.Fprintf(stdout, "# Accepted but not read by this release yet: %s\n", strings.Join(keys, ", "))
	}
	fmt.Fprint(stdout, cfg.MaskedTOML())
	return nil
}
