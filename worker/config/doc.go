// Package config is the worker's configuration: the TOML model with every
// key's default (Default), loading with ${VAR} expansion from the
// environment and strict type checks that name the key and line (load.go,
// typecheck.go, lines.go), Resolve for defaults that depend on other keys
// or on the machine, Validate that names every problem by its TOML key
// (validate.go), the one rule for secrets and their mask in every view
// (mask.go), and the Kafka connection views of the source, sinks and DLQ
// (conn.go). A config that Load returns is valid; a builder takes nothing
// else. docs/configuration.md lists every key.
package config
