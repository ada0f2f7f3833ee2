package worker

import (
	"bytes"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
)

// Mask is what a secret value looks like in every view of the config.
const Mask = "***"

// Masked returns a deep copy of c fit to show an operator: fields tagged
// `secret:"true"` and string fields whose key names a secret are replaced by
// Mask when set; maps tagged `secret:"values"` (executor.env and every
// *.client_config) keep their keys with every value masked.
func (c *Config) Masked() Config {
	out := reflect.New(reflect.TypeOf(*c)).Elem()
	maskValue(out, reflect.ValueOf(*c), "")
	return out.Interface().(Config)
}

// MaskedTOML renders the masked effective config as TOML (svc check).
func (c *Config) MaskedTOML() string {
	m := c.Masked()
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(m); err != nil {
		return "# cannot render config: " + err.Error() + "\n"
	}
	return buf.String()
}

// secretKeyName reports whether a key name alone marks its value secret.
func secretKeyName(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"password", "secret", "token", "credential", "apikey", "api_key"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

func maskValue(dst, src reflect.Value, tag string) {
	switch src.Kind() {
	case reflect.Struct:
		t := src.Type()
		for i := 0; i < src.NumField(); i++ {
			f := t.Field(i)
			ftag := f.Tag.Get("secret")
			if ftag == "" && f.Type.Kind() == reflect.String && secretKeyName(f.Tag.Get("toml")) {
				ftag = "true"
			}
			maskValue(dst.Field(i), src.Field(i), ftag)
		}
	case reflect.String:
		if tag == "true" && src.Len() > 0 {
			dst.SetString(Mask)
		} else {
			dst.SetString(src.String())
		}
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		iter := src.MapRange()
		for iter.Next() {
			v := reflect.New(src.Type().Elem()).Elem()
			vtag := ""
			if tag == "values" || secretKeyName(iter.Key().String()) {
				vtag = "true"
			}
			maskValue(v, iter.Value(), vtag)
			m.SetMapIndex(iter.Key(), v)
		}
		dst.Set(m)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := 0; i < src.Len(); i++ {
			maskValue(s.Index(i), src.Index(i), tag)
		}
		dst.Set(s)
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		maskValue(p.Elem(), src.Elem(), tag)
		dst.Set(p)
	default:
		dst.Set(src)
	}
}
