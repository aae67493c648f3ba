package bot

// VKErrorCode returns the VK API error code carried by err, if any.
var VKErrorCode = vkErrorCode

// Closing reports whether Close has begun.
func (b *Bot) Closing() bool { return b.closing.Load() }

// ForwardParam is forwardParam.
var ForwardParam = forwardParam

// SendParams is sendParams.
var SendParams = sendParams

// ExecuteArg returns the argument of r's messages.send inside execute.
func ExecuteArg(r Reply) string { return string(appendArgs(nil, sendArgs(nil, r))) }
