package config

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
)

// Mask is what a secret value looks like in every view of the config.
const Mask = "***"

// Masked returns a deep copy of c fit to show an operator: set fields
// tagged `secret:"true"` or named as secrets become Mask, and maps tagged
// `secret:"values"` keep their keys with every value masked. Nil lists and
// tables become empty ones.
func (c *Config) Masked() Config {
	return c.masked(func(string, string) string { return Mask })
}

// MaskedTOML renders the effective config as TOML for `svc check`, each
// secret replaced by a reference named after its key (ui.auth_token
// becomes "${SVC_UI_AUTH_TOKEN}"), so it loads back once those are set.
func (c *Config) MaskedTOML() string {
	m := c.masked(envRefName)
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(m); err != nil {
		return "# cannot render config: " + err.Error() + "\n"
	}
	return buf.String()
}

// envRefName is the ${VAR} placeholder of the secret at key path.
func envRefName(path, _ string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, path)
	for strings.Contains(name, "__") {
		name = strings.ReplaceAll(name, "__", "_")
	}
	return "${SVC_" + strings.Trim(name, "_") + "}"
}

func (c *Config) masked(replace func(path, value string) string) Config {
	out := reflect.New(reflect.TypeOf(*c)).Elem()
	m := masker{replace: replace}
	m.value(out, reflect.ValueOf(*c), "", "")
	return out.Interface().(Config)
}

// IsSecretName reports whether a key name alone marks its value secret
// (a password, secret, token, credential or key, case-insensitive): the
// one rule for every place that shows named values.
func IsSecretName(name string) bool {
	var buf [64]byte
	if len(name) <= len(buf) && isASCII(name) {
		// Lowered on the stack: the recorder asks for every task's env keys.
		b := buf[:len(name)]
		for i := range len(name) {
			c := name[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b[i] = c
		}
		return secretLower(b)
	}
	return secretLower([]byte(strings.ToLower(name)))
}

// secretNames are the parts of a lower-case name that make it secret.
var secretNames = [][]byte{[]byte("password"), []byte("passwd"), []byte("secret"), []byte("token"), []byte("credential"),
	[]byte("apikey"), []byte("api_key"), []byte("private_key"), []byte("access_key")}

// secretLower is IsSecretName of a name already lower-cased.
func secretLower(n []byte) bool {
	for _, s := range secretNames {
		if bytes.Contains(n, s) {
			return true
		}
	}
	return string(n) == "key" || bytes.HasSuffix(n, []byte("_key")) || bytes.HasSuffix(n, []byte("-key")) || bytes.HasSuffix(n, []byte(".key"))
}

// isASCII reports whether s has only ASCII bytes (strings.ToLower of
// other runes can yield ASCII letters: U+212A KELVIN SIGN lowers to k).
func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// MaskEnv returns a copy of env with the values of secret names replaced
// by Mask.
func MaskEnv(env map[string]string) map[string]string {
	if env == nil {
		return nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		if IsSecretName(k) {
			v = Mask
		}
		out[k] = v
	}
	return out
}

// masker copies a config value, replacing secrets.
type masker struct {
	replace func(path, value string) string
}

func (m masker) value(dst, src reflect.Value, tag, path string) {
	switch src.Kind() {
	case reflect.Struct:
		t := src.Type()
		for i := 0; i < src.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			ftag := f.Tag.Get("secret")
			if ftag == "" && f.Type.Kind() == reflect.String && IsSecretName(name) {
				ftag = "true"
			}
			m.value(dst.Field(i), src.Field(i), ftag, joinPath(path, name))
		}
	case reflect.String:
		if tag == "true" && src.Len() > 0 {
			dst.SetString(m.replace(path, src.String()))
		} else {
			dst.SetString(src.String())
		}
	case reflect.Map:
		out := reflect.MakeMapWithSize(src.Type(), src.Len())
		iter := src.MapRange()
		for iter.Next() {
			v := reflect.New(src.Type().Elem()).Elem()
			vtag := ""
			if tag == "values" || IsSecretName(iter.Key().String()) {
				vtag = "true"
			}
			m.value(v, iter.Value(), vtag, joinPath(path, iter.Key().String()))
			out.SetMapIndex(iter.Key(), v)
		}
		dst.Set(out)
	case reflect.Slice:
		out := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := 0; i < src.Len(); i++ {
			m.value(out.Index(i), src.Index(i), tag, fmt.Sprintf("%s[%d]", path, i))
		}
		dst.Set(out)
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		m.value(p.Elem(), src.Elem(), tag, path)
		dst.Set(p)
	case reflect.Interface: // inside plain tables (handler.ui_pages)
		if src.IsNil() {
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		m.value(v, src.Elem(), tag, path)
		dst.Set(v)
	default:
		dst.Set(src)
	}
}
