package bot

// VKErrorCode returns the VK API error code carried by err, if any.
var VKErrorCode = vkErrorCode

// Closing reports whether Close has begun.
func (b *Bot) Closing() bool { return b.closing.Load() }
