package callback

// SecretCompare returns the function h compares secret digests with.
func SecretCompare(h *Handler) func(x, y []byte) int { return h.compare }

// SetSecretCompare replaces the function h compares secret digests with.
func SetSecretCompare(h *Handler, f func(x, y []byte) int) { h.compare = f }

// RetryCounter reads the X-Retry-Counter header as the handler logs it.
var RetryCounter = retryCounter
