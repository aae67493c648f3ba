package freq

// Keys returns the keys s uses for identity: the list, the total and, when
// eventID is not empty, the event key.
func (s *Store) Keys(identity, eventID string) []string { return s.keys(identity, eventID) }

// ParseReply decodes a script reply.
var ParseReply = parseReply
