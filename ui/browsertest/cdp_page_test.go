package browsertest

// The tab side of the DevTools client: console capture, evaluation,
// waits, input and screenshots.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"svc/worker/workertest/wait"
)

// consoleEntry is one console message or uncaught exception of a page.
type consoleEntry struct {
	Level  string // error, warning, info, ...
	Source string // console, exception, network, ...
	Text   string
	URL    string
}

// page is one tab.
type page struct {
	t       *testing.T
	b       *browser
	session string
	target  string

	mu      sync.Mutex
	console []consoleEntry
}

// newPage opens a tab at 1280×800 with console capture on.
func (b *browser) newPage(t *testing.T) *page {
	t.Helper()
	var tg struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &tg); err != nil {
		t.Fatal(err)
	}
	var at struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": tg.TargetID, "flatten": true}, &at); err != nil {
		t.Fatal(err)
	}
	p := &page{t: t, b: b, session: at.SessionID, target: tg.TargetID}
	b.mu.Lock()
	b.sessions[at.SessionID] = p
	b.mu.Unlock()
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		p.must(m, nil, nil)
	}
	p.viewport(1280, 800)
	// Tabs opened next to each other: each behaves as the focused one, so
	// keyboard input reaches it.
	p.must("Emulation.setFocusEmulationEnabled", map[string]any{"enabled": true}, nil)
	t.Cleanup(func() { _ = b.call("", "Target.closeTarget", map[string]any{"targetId": tg.TargetID}, nil) })
	return p
}

func (p *page) event(m cdpMsg) {
	var e consoleEntry
	switch m.Method {
	case "Runtime.consoleAPICalled":
		var v struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		_ = json.Unmarshal(m.Params, &v)
		var parts []string
		for _, a := range v.Args {
			if a.Value != nil {
				parts = append(parts, fmt.Sprint(a.Value))
			} else {
				parts = append(parts, a.Description)
			}
		}
		e = consoleEntry{Level: v.Type, Source: "console", Text: strings.Join(parts, " ")}
		if e.Level == "warn" {
			e.Level = "warning"
		}
	case "Runtime.exceptionThrown":
		var v struct {
			Details struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		_ = json.Unmarshal(m.Params, &v)
		e = consoleEntry{Level: "error", Source: "exception", Text: v.Details.Text + " " + v.Details.Exception.Description}
	case "Log.entryAdded":
		var v struct {
			Entry struct {
				Level  string `json:"level"`
				Source string `json:"source"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		_ = json.Unmarshal(m.Params, &v)
		e = consoleEntry{Level: v.Entry.Level, Source: v.Entry.Source, Text: v.Entry.Text, URL: v.Entry.URL}
	default:
		return
	}
	p.mu.Lock()
	p.console = append(p.console, e)
	p.mu.Unlock()
}

func (p *page) must(method string, params, out any) {
	p.t.Helper()
	if err := p.b.call(p.session, method, params, out); err != nil {
		p.t.Fatal(err)
	}
}

// viewport sets the page's size in CSS pixels.
func (p *page) viewport(w, h int) {
	p.t.Helper()
	p.must("Emulation.setDeviceMetricsOverride", map[string]any{"width": w, "height": h, "deviceScaleFactor": 1, "mobile": w < 600}, nil)
}

// navigate loads url and waits for the document to be complete.
func (p *page) navigate(url string) {
	p.t.Helper()
	p.must("Page.navigate", map[string]any{"url": url}, nil)
	p.waitFor(`document.readyState === "complete" && location.href !== "about:blank"`, "page load of "+url)
}

// eval runs a JavaScript expression (promises awaited) and decodes its
// value into out.
func (p *page) eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.b.call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &r)
	if err != nil {
		return err
	}
	if r.Exception != nil {
		return errors.New(r.Exception.Text + " " + r.Exception.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// str evaluates expr to a string.
func (p *page) str(expr string) string {
	p.t.Helper()
	var s string
	if err := p.eval(expr, &s); err != nil {
		p.t.Fatalf("eval %s: %v", expr, err)
	}
	return s
}

// waitFor polls a JavaScript condition until it is truthy. When it gives
// up, the page's text follows the failure in the log.
func (p *page) waitFor(cond, what string) {
	p.t.Helper()
	done := false
	defer func() { // runs as wait.For's Fatalf ends the test
		if !done {
			p.t.Logf("page text:\n%s", p.text())
		}
	}()
	wait.For(p.t, cdpWait, what, func() (bool, string) {
		var ok bool
		err := p.eval("!!("+cond+")", &ok)
		return err == nil && ok, fmt.Sprintf("%s is %v (eval error %v)", cond, ok, err)
	})
	done = true
}

// text is the page's visible text, for failure messages.
func (p *page) text() string {
	var s string
	_ = p.eval(`document.body ? document.body.innerText.slice(0, 3000) : ""`, &s)
	return s
}

// click clicks the first element matching a CSS selector (and, when
// contains is set, whose text contains it).
func (p *page) click(selector, contains string) {
	p.t.Helper()
	q := fmt.Sprintf(`[...document.querySelectorAll(%q)].find((e) => e.textContent.includes(%q))`, selector, contains)
	p.waitFor(q, "an element "+selector+" with "+contains)
	if err := p.eval(q+".click()", nil); err != nil {
		p.t.Fatalf("click %s: %v", selector, err)
	}
}

// fill sets an input's value as a user typing would.
func (p *page) fill(selector, value string) {
	p.t.Helper()
	p.waitFor(fmt.Sprintf("document.querySelector(%q)", selector), selector)
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.focus(); e.value = %q; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); })()`, selector, value)
	if err := p.eval(js, nil); err != nil {
		p.t.Fatal(err)
	}
}

// key presses one key (e.g. "Tab", "Enter") on the focused element.
func (p *page) key(name string) {
	p.t.Helper()
	codes := map[string]int{"Tab": 9, "Enter": 13, "Escape": 27}
	p.must("Page.bringToFront", nil, nil)
	for _, typ := range []string{"keyDown", "keyUp"} {
		params := map[string]any{"type": typ, "key": name, "code": name, "windowsVirtualKeyCode": codes[name]}
		if name == "Enter" && typ == "keyDown" {
			params["text"] = "\r"
		}
		p.must("Input.dispatchKeyEvent", params, nil)
	}
}

// screenshot saves the viewport as dir/name.png.
func (p *page) screenshot(dir, name string) string {
	p.t.Helper()
	var r struct {
		Data string `json:"data"`
	}
	p.must("Page.captureScreenshot", map[string]any{"format": "png"}, &r)
	b, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// messages returns the console entries so far.
func (p *page) messages() []consoleEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]consoleEntry(nil), p.console...)
}
