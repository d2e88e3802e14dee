
BxJZDA¾¾DŽ>ÜA