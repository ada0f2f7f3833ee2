package ui

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
)

// EmbeddedTag is the release tag of the bundle embedded in this binary.
// Tags are immutable: any change under web/ needs a new one (a test
// compares the tree with testdata/ui/embedded.sha256).
const EmbeddedTag = "v1.4.17"

//go:embed web
var webFS embed.FS

// Embedded returns the embedded bundle tree: index.html and 404.html at the
// root, static files under assets/.
func Embedded() fs.FS {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // the directory is compiled in
	}
	return sub
}

var tagPattern = regexp.MustCompile(`^v[0-9]{1,6}\.[0-9]{1,6}\.[0-9]{1,6}$`)

// CheckTag returns an error unless tag has the release form vX.Y.Z.
func CheckTag(tag string) error {
	if !tagPattern.MatchString(tag) {
		return fmt.Errorf("ui release tag %q: want the form vX.Y.Z", tag)
	}
	return nil
}
