package bot

// VKErrorCode returns the VK API error code carried by err, if any.
var VKErrorCode = vkErrorCode
