// Package config is the worker's TOML configuration (docs/configuration.md
// lists every key): the model with its defaults, loading with ${VAR}
// expansion and checks that name every problem's key and line, the one
// rule for secrets and their mask, and the Kafka connections of the source,
// sinks and DLQ. A config that LoadFile returns is valid.
package config
