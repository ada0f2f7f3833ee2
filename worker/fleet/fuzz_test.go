package fleet

import (
	"testing"
	"time"
)

// Cards come from other processes: any bytes give a card that passes the
// checks or an error, never a panic, and a kept card's URL is a link URL.
func FuzzParseCard(f *testing.F) {
	f.Add("w1", []byte(`{"name":"w1","cluster":"default","url":"http://w1:8080","state":"running","release":"v1","started_at_ms":1,"heartbeat_ms":2,"heartbeat_interval_ms":5000,"cache_marks":{"cluster":3,"global":4},"instance":"ab"}`))
	f.Add("w1", []byte(`{"name":"w1","cluster":"x","url":"javascript:alert(1)","state":"stopped","heartbeat_ms":1}`))
	f.Add("w2", []byte(`{"name":"w2","heartbeat_interval_ms":-1}`))
	f.Add("w3", []byte(`{"name":"w3","cluster":"c","state":"running","heartbeat_ms":9,"host":"h\u001b","boot_id":"b","pid":-4}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		c, err := parseCard(name, data)
		if err != nil {
			return
		}
		if c.Name != name || (c.URL != "" && LinkURL(c.URL) != c.URL) || len(c.Release) > maxFieldBytes ||
			len(c.Host) > maxFieldBytes || len(c.BootID) > maxFieldBytes || c.PID < 0 {
			t.Fatalf("parseCard kept %+v", c)
		}
		_ = c.state(time.Now(), time.Second)
		_ = c.missed(time.Now(), 1, time.Second, time.Second)
		_ = c.ahead(time.Now())
	})
}
