package model

import (
	"maps"
	"slices"
	"unicode/utf8"
)

// Bounds on a task's labels; labels past them are dropped (by name order),
// counted in svc_task_labels_dropped_total and annotated (LabelsDroppedKind).
const (
	MaxLabels     = 32
	MaxLabelName  = 64
	MaxLabelValue = 1024
)

// LabelsDroppedKind is the annotation kind that reports dropped labels.
const LabelsDroppedKind = "svc.labels_dropped"

// LimitLabels returns labels within the bounds (m itself when nothing is
// dropped) and how many were dropped.
func LimitLabels(m map[string]string) (map[string]string, int) {
	over := len(m) > MaxLabels
	if !over {
		for k, v := range m {
			if len(k) > MaxLabelName || len(v) > MaxLabelValue || k == "" {
				over = true
				break
			}
		}
	}
	if !over {
		return m, 0
	}
	out := make(map[string]string, min(len(m), MaxLabels))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if k == "" || len(k) > MaxLabelName || len(v) > MaxLabelValue || len(out) == MaxLabels {
			continue
		}
		out[k] = v
	}
	return out, len(m) - len(out)
}

// Truncate cuts s to at most n bytes at a rune boundary and marks the cut
// with "…".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// LabelHeaderPrefix marks a Kafka record header that becomes a task label
// (svc-label-<name>); the HTTP ingress uses X-Svc-Label-<name>.
const LabelHeaderPrefix = "svc-label-"
