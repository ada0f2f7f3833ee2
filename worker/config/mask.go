package config

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

// IsSecretName reports whether a key name alone marks its value secret:
// it names a password, secret, token, credential or private/API/access key
// (case-insensitive). This is the one rule for config views, task env in
// the flight recorder and any other place that shows named values.
func IsSecretName(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"password", "passwd", "secret", "token", "credential", "apikey", "api_key", "private_key", "access_key"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return n == "key" || strings.HasSuffix(n, "_key") || strings.HasSuffix(n, "-key") || strings.HasSuffix(n, ".key")
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

func maskValue(dst, src reflect.Value, tag string) {
	switch src.Kind() {
	case reflect.Struct:
		t := src.Type()
		for i := 0; i < src.NumField(); i++ {
			f := t.Field(i)
			ftag := f.Tag.Get("secret")
			if ftag == "" && f.Type.Kind() == reflect.String && IsSecretName(f.Tag.Get("toml")) {
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
			if tag == "values" || IsSecretName(iter.Key().String()) {
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
