
BxJ<*CúGÃ¼CÁ\B