package wire

import "fmt"

// statusMessages holds the error body of each status: ASCII, no NUL, exactly
// what the reference server sends.
var statusMessages = map[Status]string{
	StatusOK:             "OK",
	StatusNotFound:       "Not found",
	StatusInvalid:        "Invalid arguments",
	StatusNotAvailable:   "Resource not available",
	StatusNotAcquired:    "Not acquired",
	StatusUnknownCommand: "Unknown command",
	StatusOutOfMemory:    "OutOfMemory",
	StatusStoreFailure:   "Store unavailable",
	StatusInternalError:  "Internal error",
}

// statusLabels names each status in snake_case, for metric labels and
// machine-readable output.
var statusLabels = map[Status]string{
	StatusOK:             "ok",
	StatusNotFound:       "not_found",
	StatusInvalid:        "invalid_arguments",
	StatusNotAvailable:   "resource_not_available",
	StatusNotAcquired:    "not_acquired",
	StatusUnknownCommand: "unknown_command",
	StatusOutOfMemory:    "out_of_memory",
	StatusStoreFailure:   "store_unavailable",
	StatusInternalError:  "internal_error",
}

// Label returns the status's snake_case name ("not_found"), or "0xnn" for
// a status this codec does not know.
func (s Status) Label() string {
	if l, ok := statusLabels[s]; ok {
		return l
	}
	return fmt.Sprintf("0x%02x", byte(s))
}

// Message returns the text an error response with this status carries as
// its body, or "status 0xNN" for a status this codec does not know.
func (s Status) Message() string {
	if m, ok := statusMessages[s]; ok {
		return m
	}
	return fmt.Sprintf("status 0x%02x", byte(s))
}

// String returns the status's message.
func (s Status) String() string { return s.Message() }

// Error returns the status's message, so a Status can be an errors.Is target.
func (s Status) Error() string { return s.Message() }

// A StatusError is a response with a status other than StatusOK, as a client
// sees it. errors.Is(err, StatusNotFound) reports whether err is a
// *StatusError with that status.
type StatusError struct {
	Opcode Opcode
	Status Status
	// Message is the response body as the server sent it.
	Message string
}

// Error describes the failed request.
func (e *StatusError) Error() string {
	return fmt.Sprintf("counters: %s: %s (status 0x%02x)", e.Opcode, e.Message, byte(e.Status))
}

// Is reports whether target is the Status of e.
func (e *StatusError) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}
