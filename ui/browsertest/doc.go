// Package browsertest holds the browser tests of the operator UI; it has
// no code of its own and nothing imports it.
//
// TestBrowser builds the svc binary (TestMain), starts real workers from
// it (a Kafka worker fed from an in-process kfake cluster, with a shell
// script as executor and the flight recorder on disk, and a locked-down
// HTTP-only worker), and drives headless Chromium over the Chrome
// DevTools Protocol (cdp_test.go, cdp_page_test.go: a small client on
// x/net/websocket) through the scenarios an operator meets: sign-in, each
// page with its data and without console errors, a failed message from
// the dashboard to its trace and a probe, the consume pause, declared
// pages, kill switches, the link templates against the Go side, and a
// card in the shared folder naming an untrusted URL (trust_test.go: its
// listener never hears from the browser, Live lists it as not trusted).
//
// Run it with
//
//	go test -race ./ui/browsertest/
//
// It needs Chromium at /usr/bin/chromium or on PATH (or SVC_CHROMIUM
// naming a binary). Without one it skips, except when CI is set: then it
// fails (.ci/run installs Debian's chromium). With -short it skips and
// builds nothing. Each scenario saves a 1280×800 screenshot into
// $SVC_SCREENSHOT_DIR (default: svc-browser-screenshots under the temp
// dir; the folder is printed); -update-screenshots copies them into
// docs/screenshots.
package browsertest
