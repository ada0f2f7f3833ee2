package main

import (
	"errors"
	"fmt"
	"io"

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
	fmt.Fprintf(stdout, "# %s: OK (secrets masked as %q)\n", f.config, config.Mask)
	fmt.Fprint(stdout, cfg.MaskedTOML())
	return nil
}
