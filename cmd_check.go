package main

import (
	"fmt"
	"io"

	"svc/httpd/root"
)

func cmdCheck(args []string, stdout io.Writer) error {
	f, err := parseFlags("check", args, stdout)
	if err != nil {
		return err
	}
	cfg, err := root.LoadConfig(f.config)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# %s: OK\n", f.config)
	fmt.Fprintln(stdout, "# The effective config: every default filled in. Each secret is replaced by a")
	fmt.Fprintln(stdout, "# ${SVC_...} reference; set those variables to load this output back.")
	fmt.Fprint(stdout, cfg.MaskedTOML())
	return nil
}
