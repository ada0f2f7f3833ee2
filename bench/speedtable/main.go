// Command speedtable prints the table of bench/speed.sh from its results
// file: one line per measured run, key=value tokens, at least round=,
// path= (kafka, http8, http32, spawn8, spawn32), sut= (svc, svc-eos, floor, svc-mem,
// svc-live, benthos) and rate=, with cpu_us=, rss_mib=, p99_ms= where
// measured. Each row compares two systems of one path; every figure is
// the median over the rounds, and the ratio is the median of the
// per-round ratios (each round's two systems ran back to back). "CPU
// ratio" is the floor's (or base's) worker CPU per task over svc's, also a
// median of per-round ratios: on a shared machine, where throughput
// follows the neighbours' load, it is the steadier figure.
//
//	speedtable results.txt
package main

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
)

type run map[string]string

func (r run) f(k string) (float64, bool) {
	v, ok := r[k]
	if !ok {
		return 0, false
	}
	x, err := strconv.ParseFloat(v, 64)
	return x, err == nil
}

// row compares system a (the one judged) with b (its floor or baseline).
type row struct {
	name, path, a, b string
	unit             string
	goal             string
	min              float64 // least a/b ratio the goal asks (0: no goal)
	inverse          bool    // show the cost 1 - a/b instead of the ratio
}

var rows = []row{
	{"Kafka persistent pool 8 (svc vs floor)", "kafka", "svc", "floor", "msgs/s", ">= 50 %", 0.50, false},
	{"Kafka exactly-once (svc-eos vs svc at-least-once)", "kafka", "svc-eos", "svc", "msgs/s", ">= 70 %", 0.70, false},
	{"Kafka exactly-once (svc-eos vs floor)", "kafka", "svc-eos", "floor", "msgs/s", "", 0, false},
	{"HTTP c=8 (svc vs floor)", "http8", "svc", "floor", "req/s", ">= 70 %", 0.70, false},
	{"HTTP c=32 (svc vs floor)", "http32", "svc", "floor", "req/s", ">= 70 %", 0.70, false},
	{"recorder cost c=8 (svc vs memory-only)", "http8", "svc", "svc-mem", "req/s", "cost <= 10 %", 0.90, true},
	{"recorder cost c=32 (svc vs memory-only)", "http32", "svc", "svc-mem", "req/s", "cost <= 10 %", 0.90, true},
	{"Live page cost c=8 (svc+/ws vs svc)", "http8", "svc-live", "svc", "req/s", "cost <= 5 %", 0.95, true},
	{"Live page cost c=32 (svc+/ws vs svc)", "http32", "svc-live", "svc", "req/s", "cost <= 5 %", 0.95, true},
	{"spawn cat c=8 (svc vs bare spawn)", "spawn8", "svc", "floor", "req/s", ">= 85 %", 0.85, false},
	{"spawn cat c=32 (svc vs bare spawn)", "spawn32", "svc", "floor", "req/s", ">= 85 %", 0.85, false},
	{"Benthos c=8 (svc vs Benthos, 8 children)", "http8", "svc", "benthos", "req/s", "", 0, false},
	{"Benthos c=32 (svc vs Benthos, 8 children)", "http32", "svc", "benthos", "req/s", "", 0, false},
	{"Benthos c=8 (svc vs Benthos, 1 child)", "http8", "svc", "benthos1", "req/s", "", 0, false},
	{"Benthos c=32 (svc vs Benthos, 1 child)", "http32", "svc", "benthos1", "req/s", "", 0, false},
	// SVC_B: the other binary against this one, same config, same run.
	{"A/B Kafka (svc-b vs svc)", "kafka", "svc-b", "svc", "msgs/s", "", 0, false},
	{"A/B HTTP c=8 (svc-b vs svc)", "http8", "svc-b", "svc", "req/s", "", 0, false},
	{"A/B HTTP c=32 (svc-b vs svc)", "http32", "svc-b", "svc", "req/s", "", 0, false},
}

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: speedtable results.txt")
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	var runs []run
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		r := run{}
		for _, tok := range strings.Fields(sc.Text()) {
			if k, v, ok := strings.Cut(tok, "="); ok {
				r[k] = v
			}
		}
		if r["path"] != "" && r["sut"] != "" && r["rate"] != "" {
			runs = append(runs, r)
		}
	}
	// by path, sut, round
	idx := map[[3]string]run{}
	rounds := map[string]bool{}
	for _, r := range runs {
		idx[[3]string{r["path"], r["sut"], r["round"]}] = r
		rounds[r["round"]] = true
	}
	var roundList []string
	for k := range rounds {
		roundList = append(roundList, k)
	}
	sort.Strings(roundList)

	head := []string{"path", "svc", "floor/base", "ratio", "goal", "met", "svc CPU/task", "floor/base CPU/task", "CPU ratio", "svc peak RSS", "floor/base peak RSS", "svc p99", "floor/base p99"}
	var table [][]string
	for _, rw := range rows {
		var av, bv, ratio, cpuRatio, acpu, bcpu, arss, brss, ap99, bp99 []float64
		for _, rd := range roundList {
			a, aok := idx[[3]string{rw.path, rw.a, rd}]
			b, bok := idx[[3]string{rw.path, rw.b, rd}]
			add := func(dst *[]float64, r run, ok bool, k string) {
				if ok {
					if x, ok := r.f(k); ok {
						*dst = append(*dst, x)
					}
				}
			}
			add(&av, a, aok, "rate")
			add(&bv, b, bok, "rate")
			add(&acpu, a, aok, "cpu_us")
			add(&bcpu, b, bok, "cpu_us")
			add(&arss, a, aok, "rss_mib")
			add(&brss, b, bok, "rss_mib")
			add(&ap99, a, aok, "p99_ms")
			add(&bp99, b, bok, "p99_ms")
			if aok && bok {
				x, _ := a.f("rate")
				y, _ := b.f("rate")
				if y > 0 {
					ratio = append(ratio, x/y)
				}
				xc, xok := a.f("cpu_us")
				yc, yok := b.f("cpu_us")
				if xok && yok && xc > 0 {
					cpuRatio = append(cpuRatio, yc/xc)
				}
			}
		}
		if len(av) == 0 && (len(bv) == 0 || rw.a == "svc-b") {
			continue // nothing measured, or no SVC_B in this run
		}
		ratioS, met := "-", ""
		if len(ratio) > 0 {
			m := median(ratio)
			if rw.inverse {
				ratioS = fmt.Sprintf("%.0f %% (cost %.1f %%)", 100*m, 100*(1-m))
			} else {
				ratioS = fmt.Sprintf("%.0f %%", 100*m)
			}
			if rw.min > 0 {
				met = map[bool]string{true: "yes", false: "NO"}[m >= rw.min]
			}
		}
		table = append(table, []string{rw.name,
			num(av, "%.0f "+rw.unit), num(bv, "%.0f "+rw.unit), ratioS, rw.goal, met,
			num(acpu, "%.1f µs"), num(bcpu, "%.1f µs"), pct(cpuRatio), num(arss, "%.1f MiB"), num(brss, "%.1f MiB"),
			num(ap99, "%.2f ms"), num(bp99, "%.2f ms")})
	}
	// The goals that are not ratios: the Kafka path's worker CPU and RSS.
	var cpu, rss []float64
	for _, rd := range roundList {
		if r, ok := idx[[3]string{"kafka", "svc", rd}]; ok {
			if x, ok := r.f("cpu_us"); ok {
				cpu = append(cpu, x)
			}
			if x, ok := r.f("rss_mib"); ok {
				rss = append(rss, x)
			}
		}
	}
	if len(cpu) > 0 {
		table = append(table, []string{"Kafka worker CPU per task (svc)", num(cpu, "%.1f µs"), "", "", "<= 40 µs", yes(median(cpu) <= 40), "", "", "", "", "", "", ""})
	}
	if len(rss) > 0 {
		table = append(table, []string{"Kafka peak RSS through the backlog (svc)", num(rss, "%.1f MiB"), "", "", "<= 64 MiB", yes(median(rss) <= 64), "", "", "", "", "", "", ""})
	}
	fmt.Printf("medians over %d round(s)\n", len(roundList))
	printTable(head, table)
}

func yes(b bool) string { return map[bool]string{true: "yes", false: "NO"}[b] }

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// pct is the median of ratios as a percentage.
func pct(x []float64) string {
	if len(x) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f %%", 100*median(x))
}

func num(x []float64, format string) string {
	if len(x) == 0 {
		return "-"
	}
	return fmt.Sprintf(format, median(x))
}

func printTable(head []string, rows [][]string) {
	w := make([]int, len(head))
	for i, h := range head {
		w[i] = len([]rune(h))
	}
	for _, r := range rows {
		for i, c := range r {
			w[i] = max(w[i], len([]rune(c)))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			b.WriteString(" " + c + strings.Repeat(" ", w[i]-len([]rune(c))) + " |")
		}
		fmt.Println(b.String())
	}
	line(head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = strings.Repeat("-", w[i])
	}
	line(sep)
	for _, r := range rows {
		line(r)
	}
}
