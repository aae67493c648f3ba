package wire

import "fmt"

// An opSpec describes one known opcode: the name used in logs and in the
// command:<name> statistics, and the largest valid request body.
type opSpec struct {
	known   bool
	name    string
	maxBody uint32
}

// opSpecs is the table of known opcodes. Adding an opcode to the codec is one
// entry here plus its body encoders and decoders. The resource opcodes take
// names of up to MaxNameLen bytes, as the reference server does; the
// extension opcodes' names and keys are bounded by what their stores
// accept, MaxFieldLen.
var opSpecs = [256]opSpec{
	OpNoop:    {true, "noop", 0},
	OpGet:     {true, "get", 2 + MaxNameLen},
	OpAcquire: {true, "acquire", 4 + 4 + 2 + MaxNameLen},
	OpRelease: {true, "release", 4 + 2 + MaxNameLen},
	OpStats:   {true, "stats", 0},
	OpDump:    {true, "dump", 0},
	OpHit:     {true, "hit", 2 + MaxFieldLen},
	OpTotal:   {true, "total", 2 + MaxFieldLen},
	OpAdd:     {true, "add", 8 + 2 + MaxFieldLen},
	OpList:    {true, "list", 2 + 2*(2+MaxListField)},
	OpVisit:   {true, "visit", 4 + 2 + MaxFieldLen + 2 + MaxFieldLen},
	OpLeave:   {true, "leave", 2 + MaxFieldLen + 2 + MaxFieldLen},
	OpActive:  {true, "active", 4 + 2 + MaxFieldLen},
	// The window and unique counters.
	OpWindowHit:   {true, "whit", 4 + 2 + MaxFieldLen},
	OpWindowCount: {true, "wcount", 4 + 2 + MaxFieldLen},
	OpUniqueAdd:   {true, "uadd", 2 + MaxUniqueFieldLen + 2 + MaxUniqueKeys*(2+MaxUniqueFieldLen)},
	OpUniqueCount: {true, "ucount", 2 + MaxUnionNames*(2+MaxUniqueFieldLen)},
}

// knownOps lists the known opcodes in ascending order.
var knownOps = func() []Opcode {
	var ops []Opcode
	for i := range opSpecs {
		if opSpecs[i].known {
			ops = append(ops, Opcode(i))
		}
	}
	return ops
}()

// Opcodes returns every opcode this codec knows, in ascending order. The
// caller must not modify the slice.
func Opcodes() []Opcode { return knownOps }

// Known reports whether op is an opcode this codec knows.
func (op Opcode) Known() bool { return opSpecs[op].known }

// String returns the opcode's lower-case name ("acquire"), or its hex value
// for an unknown opcode.
func (op Opcode) String() string {
	if s := opSpecs[op]; s.known {
		return s.name
	}
	return fmt.Sprintf("0x%02x", byte(op))
}

// MaxRequestBody returns the largest request body accepted for op: the
// largest valid body plus BodyAllowance, or MaxUnknownBody for an unknown
// opcode.
func (op Opcode) MaxRequestBody() uint32 {
	if s := opSpecs[op]; s.known {
		return s.maxBody + BodyAllowance
	}
	return MaxUnknownBody
}
