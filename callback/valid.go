package callback

// valid reports whether data is one JSON value, blanks around it allowed,
// exactly as json.Valid does (the grammar of RFC 8259: numbers in their
// one form, strings without control characters and with known escapes
// only, bytes past ASCII taken as they are, at most 10,000 levels of
// nesting), in one pass without a function call per byte: json.Valid's
// scanner was a twentieth of the service's CPU under load, for bodies
// fastjson had already parsed, and fastjson's own Validate is no
// substitute: it takes control characters inside strings.
// FuzzValidMatchesEncodingJSON compares valid with json.Valid.
func valid(data []byte) bool {
	v := validator{data: data}
	v.blanks()
	if !v.value(0) {
		return false
	}
	v.blanks()
	return v.i == len(data)
}

// maxNesting is encoding/json's limit of nested arrays and objects.
const maxNesting = 10000

type validator struct {
	data []byte
	i    int
}

// blanks skips JSON's white space.
func (v *validator) blanks() {
	for v.i < len(v.data) {
		switch v.data[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

// value reads one value at nesting depth.
func (v *validator) value(depth int) bool {
	if v.i >= len(v.data) {
		return false
	}
	switch c := v.data[v.i]; {
	case c == '{':
		return v.container(depth+1, '}', v.member)
	case c == '[':
		return v.container(depth+1, ']', v.value)
	case c == '"':
		v.i++
		return v.str()
	case c == '-' || '0' <= c && c <= '9':
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

func (v *validator) literal(s string) bool {
	if len(v.data)-v.i < len(s) || string(v.data[v.i:v.i+len(s)]) != s {
		return false
	}
	v.i += len(s)
	return true
}

// at reports whether the next byte is c.
func (v *validator) at(c byte) bool { return v.i < len(v.data) && v.data[v.i] == c }

// container reads an object or an array from its opening byte to closer:
// elements read by element, at depth, separated by commas.
func (v *validator) container(depth int, closer byte, element func(depth int) bool) bool {
	if depth > maxNesting {
		return false
	}
	v.i++
	v.blanks()
	if v.at(closer) {
		v.i++
		return true
	}
	for {
		if !element(depth) {
			return false
		}
		v.blanks()
		switch {
		case v.at(','):
			v.i++
			v.blanks()
		case v.at(closer):
			v.i++
			return true
		default:
			return false
		}
	}
}

// member reads an object's member: a string, a colon and a value.
func (v *validator) member(depth int) bool {
	if !v.at('"') {
		return false
	}
	v.i++
	if !v.str() {
		return false
	}
	v.blanks()
	if !v.at(':') {
		return false
	}
	v.i++
	v.blanks()
	return v.value(depth)
}

// str reads a string's text after its opening quote, and the closing one.
func (v *validator) str() bool {
	for v.i < len(v.data) {
		c := v.data[v.i]
		v.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if v.i >= len(v.data) {
				return false
			}
			e := v.data[v.i]
			v.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(v.data)-v.i < 4 {
					return false
				}
				for _, h := range v.data[v.i : v.i+4] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				v.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// number reads a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *validator) number() bool {
	if v.data[v.i] == '-' {
		v.i++
	}
	switch {
	case v.at('0'):
		v.i++
	case v.digits() == 0:
		return false
	}
	if v.at('.') {
		v.i++
		if v.digits() == 0 {
			return false
		}
	}
	if v.at('e') || v.at('E') {
		v.i++
		if v.at('+') || v.at('-') {
			v.i++
		}
		if v.digits() == 0 {
			return false
		}
	}
	return true
}

// digits skips a run of decimal digits and returns its length.
func (v *validator) digits() int {
	start := v.i
	for v.i < len(v.data) && '0' <= v.data[v.i] && v.data[v.i] <= '9' {
		v.i++
	}
	return v.i - start
}
