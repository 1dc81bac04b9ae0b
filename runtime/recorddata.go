package runtime

// decodePlain decodes data into d as json.Unmarshal does, for the data
// object the runtime writes: one object of at most 32 members, its names
// and string values printable ASCII without escapes, its numbers
// integers of at most 9 digits, its other values true and false, no
// name twice, whitespace anywhere JSON allows it. It reports false,
// with d partly set, for anything else (then decode it with
// json.Unmarshal); TestDecodePlainMatches holds the two to the same
// result. A long log's records are decoded once each: this skips the
// reflection of the general decoder.
func (d *recordData) decodePlain(data []byte) bool {
	var names [32][]byte
	n := 0
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	for {
		nb, j, ok := plainString(data, i)
		if !ok || n == len(names) {
			return false
		}
		for _, seen := range names[:n] {
			if string(seen) == string(nb) {
				return false
			}
		}
		names[n] = nb
		name := nb // compared, not kept: no string is made of it
		n++
		i = skipSpace(data, j)
		if i == len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		if i == len(data) {
			return false
		}
		switch c := data[i]; {
		case c == '"':
			v, j, ok := plainString(data, i)
			if !ok {
				return false
			}
			if !d.setString(name, v) && d.otherField(name) {
				return false // a string where a number or boolean goes
			}
			i = j
		case c == 't' || c == 'f':
			v, j, ok := literal(data, i)
			if !ok || (string(name) != "sideEffecting" && (isStringField(name) || d.otherField(name))) {
				return false
			}
			if string(name) == "sideEffecting" {
				d.SideEffecting = v
			}
			i = j
		case c == '-' || c >= '0' && c <= '9':
			v, j, ok := smallInt(data, i)
			if !ok {
				return false
			}
			switch string(name) {
			case "attempt":
				d.Attempt = &v
			case "index":
				d.Index = &v
			default:
				if isStringField(name) || d.otherField(name) {
					return false
				}
			}
			i = j
		default:
			return false // null, an object, an array or not JSON
		}
		i = skipSpace(data, i)
		if i == len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// setString sets the string member of d named name to v and reports
// whether d has one (a setter, not a pointer to the member, so that d
// can stay on its caller's stack).
func (d *recordData) setString(name, v []byte) bool {
	switch string(name) {
	case "approval":
		d.Approval = string(v)
	case "argsDigest":
		d.ArgsDigest = string(v)
	case "storedArgsDigest":
		d.StoredArgsDigest = string(v)
	case "bindDigest":
		d.BindDigest = string(v)
	case "defDigest":
		d.DefDigest = string(v)
	case "playbook":
		d.Playbook = string(v)
	case "version":
		d.Version = string(v)
	case "documentDigest":
		d.DocumentDigest = string(v)
	case "harnessDigest":
		d.HarnessDigest = string(v)
	case "inputDigest":
		d.InputDigest = string(v)
	case "resultDigest":
		d.ResultDigest = string(v)
	case "outputDigest":
		d.OutputDigest = string(v)
	case "code":
		d.Code = string(v)
	case "reason":
		d.Reason = string(v)
	case "by":
		d.By = string(v)
	default:
		return false
	}
	return true
}

// isStringField reports whether recordData has a string member named
// name.
func isStringField(name []byte) bool {
	var d recordData
	return d.setString(name, nil)
}

// otherField reports whether name is a member of d that is not a string.
func (d *recordData) otherField(name []byte) bool {
	switch string(name) {
	case "sideEffecting", "attempt", "index":
		return true
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads the string at b[i] (a '"'), printable ASCII without
// a backslash, and returns its bytes (in b) and the index after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, i, false
		}
	}
	return nil, i, false
}

// literal reads true or false at b[i].
func literal(b []byte, i int) (v bool, next int, ok bool) {
	n := 0
	switch {
	case len(b)-i >= 4 && string(b[i:i+4]) == "true":
		v, n = true, 4
	case len(b)-i >= 5 && string(b[i:i+5]) == "false":
		n = 5
	default:
		return false, i, false
	}
	next, ok = endOfLiteral(b, i+n)
	return v, next, ok
}

// endOfLiteral checks that a literal or number ending at i is not
// followed by more of one.
func endOfLiteral(b []byte, i int) (int, bool) {
	if i < len(b) {
		switch c := b[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '}':
		default:
			return i, false
		}
	}
	return i, true
}

// smallInt reads an integer of at most 9 digits at b[i]: -?(0|[1-9][0-9]*),
// not followed by a fraction or an exponent.
func smallInt(b []byte, i int) (v, next int, ok bool) {
	neg := b[i] == '-'
	j := i
	if neg {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		v = v*10 + int(b[j]-'0')
		j++
	}
	digits := j - start
	if digits == 0 || digits > 9 || (digits > 1 && b[start] == '0') {
		return 0, i, false
	}
	if neg {
		v = -v
	}
	next, ok = endOfLiteral(b, j)
	return v, next, ok
}
