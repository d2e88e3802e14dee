Bdataj
locationweights.binp