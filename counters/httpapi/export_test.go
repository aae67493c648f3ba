package httpapi

// RequireToken is the token check New puts before every route.
var RequireToken = requireToken
