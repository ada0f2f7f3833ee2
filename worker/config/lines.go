package config

import (
	"strconv"
	"strings"
)

// keyLines maps every key path of a TOML document to the line it is set
// on, in the form problems use ("sinks.kafka[1].name"). It reads headers,
// key = value lines and inline tables line by line, skipping multi-line
// strings; a key it cannot place has no line.
func keyLines(text string) map[string]int {
	out := map[string]int{}
	arrays := map[string]int{} // [[path]] → index of the current element
	table := ""
	var skip string // closing delimiter of a multi-line value being skipped
	depth := 0      // open brackets of a multi-line array being skipped
	arr := arrayTables{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if skip != "" {
			if strings.Contains(line, skip) {
				skip = ""
			}
			continue
		}
		if depth > 0 {
			depth = arr.scan(stripComment(line), depth, n, out)
			continue
		}
		line = strings.TrimSpace(stripComment(line))
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "[["):
			name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "[["), "]]"))
			p := dottedKey(name)
			idx := 0
			if last, ok := arrays[p]; ok {
				idx = last + 1
			}
			arrays[p] = idx
			table = p + "[" + strconv.Itoa(idx) + "]"
			out[p] = n
			out[table] = n
			continue
		case strings.HasPrefix(line, "["):
			name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "["), "]"))
			table = indexed(dottedKey(name), arrays)
			out[table] = n
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		path := joinPath(table, dottedKey(key))
		setOnce(out, path, n)
		value = strings.TrimSpace(value)
		switch {
		case strings.HasPrefix(value, `"""`) && strings.Count(value, `"""`) == 1:
			skip = `"""`
		case strings.HasPrefix(value, `'''`) && strings.Count(value, `'''`) == 1:
			skip = `'''`
		case strings.HasPrefix(value, "{"):
			inlineKeys(path, value, n, out)
		case strings.HasPrefix(value, "["):
			arr = arrayTables{path: path}
			depth = arr.scan(value, 0, n, out)
		}
	}
	return out
}

// inlineKeys records the keys of an inline table value.
func inlineKeys(path, value string, line int, out map[string]int) {
	stack := []string{path}
	cur := ""
	inStr := byte(0)
	for i := 0; i < len(value); i++ {
		c := value[i]
		if inStr != 0 {
			if c == '\\' && inStr == '"' {
				i++
			} else if c == inStr {
				inStr = 0
			}
			if inStr == 0 || len(stack) == 0 {
				continue
			}
			cur += string(c)
			continue
		}
		switch c {
		case '"', '\'':
			inStr = c
			cur += string(c)
		case '{':
			cur = ""
		case '=':
			k := joinPath(stack[len(stack)-1], dottedKey(cur))
			setOnce(out, k, line)
			rest := strings.TrimSpace(value[i+1:])
			if strings.HasPrefix(rest, "{") {
				stack = append(stack, k)
			}
			cur = ""
		case '}':
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			cur = ""
		case ',':
			cur = ""
		default:
			cur += string(c)
		}
	}
}

// arrayTables places the keys of the inline tables of an array value
// (peers = [{ name = "a" }, { name = "b" }]), which may span lines with
// one or more tables on each.
type arrayTables struct {
	path string
	idx  int // index of the next table element
}

// scan reads one line of the array at bracket depth and returns the depth
// after it.
func (a *arrayTables) scan(line string, depth, n int, out map[string]int) int {
	start := -1
	eachCode(line, func(i int, c byte) bool {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case '{':
			if depth == 1 && start < 0 {
				start = i
			}
			depth++
		case '}':
			depth--
			if depth == 1 && start >= 0 {
				elem := a.path + "[" + strconv.Itoa(a.idx) + "]"
				setOnce(out, elem, n)
				inlineKeys(elem, line[start:i+1], n, out)
				a.idx++
				start = -1
			}
		}
		return true
	})
	return depth
}

// indexed rewrites a table path whose prefix is an array of tables to
// point at its current element: "sinks.kafka.breaker" → "sinks.kafka[1].breaker".
func indexed(path string, arrays map[string]int) string {
	parts := strings.Split(path, ".")
	out := ""
	for i, p := range parts {
		out = joinPath(out, p)
		if idx, ok := arrays[strings.Join(parts[:i+1], ".")]; ok && i < len(parts)-1 {
			out += "[" + strconv.Itoa(idx) + "]"
		}
	}
	return out
}

// dottedKey normalizes a dotted TOML key: quotes removed, spaces around
// its parts trimmed.
func dottedKey(key string) string {
	var parts []string
	cur, inStr := "", byte(0)
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case inStr != 0 && c == inStr:
			inStr = 0
		case inStr != 0:
			cur += string(c)
		case c == '"' || c == '\'':
			inStr = c
		case c == '.':
			parts = append(parts, strings.TrimSpace(cur))
			cur = ""
		default:
			cur += string(c)
		}
	}
	return strings.Join(append(parts, strings.TrimSpace(cur)), ".")
}

// setOnce records the first line a key is set on.
func setOnce(out map[string]int, key string, line int) {
	if _, seen := out[key]; !seen {
		out[key] = line
	}
}

func joinPath(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// eachCode calls f with every byte of line that is outside a string
// literal, with its index, until f returns false.
func eachCode(line string, f func(i int, c byte) bool) {
	inStr := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inStr != 0 && c == '\\' && inStr == '"':
			i++
		case inStr != 0 && c == inStr:
			inStr = 0
		case inStr != 0:
		case c == '"' || c == '\'':
			inStr = c
		default:
			if !f(i, c) {
				return
			}
		}
	}
}

// stripComment drops a trailing # comment outside of strings.
func stripComment(line string) string {
	end := len(line)
	eachCode(line, func(i int, c byte) bool {
		if c == '#' {
			end = i
			return false
		}
		return true
	})
	return line[:end]
}

// nestingDepth is the deepest bracket or brace nesting of text outside
// strings and comments, or its longest dotted key.
func nestingDepth(text string) int {
	deepest, d := 0, 0
	for _, line := range strings.Split(text, "\n") {
		dots := 0
		eachCode(stripComment(line), func(_ int, c byte) bool {
			switch c {
			case '[', '{':
				d++
				deepest = max(deepest, d)
			case ']', '}':
				d = max(0, d-1)
			case '.':
				dots++
				deepest = max(deepest, dots+1)
			}
			return true
		})
	}
	return deepest
}
