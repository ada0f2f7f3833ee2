package kconn

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// clientKey describes one supported client_config key: its accepted integer
// range (kgo's own bounds, so a bad value fails at config load rather than
// at client creation) and how it maps to kgo.
type clientKey struct {
	name     string
	isString bool // client.id
	isBool   bool // enable.metrics.push: "true" or "false", parsed as 1 or 0; every other key is an integer
	min, max int64
	group    bool // applied only by GroupOpts
	apply    func(v int64) []kgo.Opt
}

// maxWireMs is the largest millisecond value kgo accepts for timeouts that
// travel as int32 on the wire.
const maxWireMs = 1<<31 - 1

// ms is apply for a key in milliseconds that maps to one option.
func ms[O kgo.Opt](opt func(time.Duration) O) func(int64) []kgo.Opt {
	return func(v int64) []kgo.Opt { return []kgo.Opt{opt(time.Duration(v) * time.Millisecond)} }
}

// clientKeys returns the supported keys (a function, so the table cannot
// be mutated).
func clientKeys() []clientKey {
	return []clientKey{
		{name: "client.id", isString: true},
		// KIP-714 client metrics: off unless "true" (see Opts).
		{name: "enable.metrics.push", isBool: true, min: 0, max: 1, apply: func(int64) []kgo.Opt { return nil }},
		{name: "request.timeout.ms", min: 100, max: 15 * 60 * 1000, apply: ms(kgo.RequestTimeoutOverhead)},
		{name: "metadata.max.age.ms", min: 10, max: 60 * 60 * 1000, apply: func(v int64) []kgo.Opt {
			// kgo rejects a max age below its 5s default min age.
			d := time.Duration(v) * time.Millisecond
			return []kgo.Opt{kgo.MetadataMaxAge(d), kgo.MetadataMinAge(min(d, 5*time.Second))}
		}},
		{name: "fetch.max.bytes", min: 1, max: 1 << 30, apply: func(v int64) []kgo.Opt {
			opts := []kgo.Opt{kgo.FetchMaxBytes(int32(v))}
			if v > 100<<20 { // kgo needs max read bytes >= fetch max bytes
				opts = append(opts, kgo.BrokerMaxReadBytes(int32(v)))
			}
			return opts
		}},
		{name: "fetch.max.wait.ms", min: 10, max: maxWireMs, apply: ms(kgo.FetchMaxWait)},
		{name: "session.timeout.ms", min: 100, max: maxWireMs, group: true, apply: ms(kgo.SessionTimeout)},
		{name: "heartbeat.interval.ms", min: 1, max: maxWireMs, group: true, apply: ms(kgo.HeartbeatInterval)},
		{name: "rebalance.timeout.ms", min: 100, max: maxWireMs, group: true, apply: ms(kgo.RebalanceTimeout)},
		{name: "linger.ms", min: 0, max: 60 * 1000, apply: ms(kgo.ProducerLinger)},
		{name: "max.buffered.records", min: 1, max: maxWireMs, apply: func(v int64) []kgo.Opt {
			return []kgo.Opt{kgo.MaxBufferedRecords(int(v))}
		}},
	}
}

// ClientConfigKeys returns the supported client_config keys, sorted.
func ClientConfigKeys() []string {
	keys := clientKeys()
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, k.name)
	}
	slices.Sort(names)
	return names
}

// ValidateClientConfig reports every unknown key and every value that is not
// an integer in the key's range, in key order. Each error names the key as
// client_config.<key>.
func ValidateClientConfig(cc map[string]string) []error {
	var errs []error
	for _, name := range sortedKeys(cc) {
		if _, _, err := parseClientKey(name, cc[name]); err != nil {
			errs = append(errs, err)
		}
	}
	// kgo rejects a heartbeat interval above the session timeout (45s default).
	hb, errHB := strconv.ParseInt(strings.TrimSpace(cc["heartbeat.interval.ms"]), 10, 64)
	session, errS := strconv.ParseInt(strings.TrimSpace(cc["session.timeout.ms"]), 10, 64)
	if errS != nil {
		session = 45000
	}
	if errHB == nil && hb > session {
		errs = append(errs, fmt.Errorf("client_config.heartbeat.interval.ms: %d is larger than the session timeout %d", hb, session))
	}
	return errs
}

// clientConfigOpts translates cc into kgo options, either the group-only keys
// (group true) or all the others.
func clientConfigOpts(cc map[string]string, group bool) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	for _, name := range sortedKeys(cc) {
		k, v, err := parseClientKey(name, cc[name])
		if err != nil {
			return nil, err
		}
		if k.group != group {
			continue
		}
		if k.isString {
			opts = append(opts, kgo.ClientID(cc[name]))
			continue
		}
		opts = append(opts, k.apply(v)...)
	}
	return opts, nil
}

// parseClientKey finds name in the key table and parses its value.
func parseClientKey(name, raw string) (clientKey, int64, error) {
	i := slices.IndexFunc(clientKeys(), func(k clientKey) bool { return k.name == name })
	if i < 0 {
		return clientKey{}, 0, fmt.Errorf("client_config.%s: unknown key (supported: %s)", name, strings.Join(ClientConfigKeys(), ", "))
	}
	k := clientKeys()[i]
	if k.isString {
		if strings.TrimSpace(raw) == "" || len(raw) > 256 {
			return k, 0, fmt.Errorf("client_config.%s: must be 1-256 characters", name)
		}
		return k, 0, nil
	}
	if k.isBool {
		switch strings.TrimSpace(raw) {
		case "true":
			return k, 1, nil
		case "false":
			return k, 0, nil
		}
		return k, 0, fmt.Errorf("client_config.%s: %q is not true or false", name, raw)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil {
		return k, 0, fmt.Errorf("client_config.%s: %q is not an integer", name, raw)
	}
	if v < k.min || v > k.max {
		return k, 0, fmt.Errorf("client_config.%s: %d is outside [%d, %d]", name, v, k.min, k.max)
	}
	return k, v, nil
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// RequestTimeout returns the request.timeout.ms value of cc, if valid.
func RequestTimeout(cc map[string]string) (time.Duration, bool) {
	v, ok := Int(cc, "request.timeout.ms")
	return time.Duration(v) * time.Millisecond, ok
}

// Int returns the value of integer key name of cc, if set and valid.
func Int(cc map[string]string, name string) (int64, bool) {
	raw, ok := cc[name]
	if !ok {
		return 0, false
	}
	_, v, err := parseClientKey(name, raw)
	return v, err == nil
}
