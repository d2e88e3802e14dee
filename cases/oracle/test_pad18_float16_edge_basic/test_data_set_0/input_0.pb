
BxJ¾A³4aAFd@