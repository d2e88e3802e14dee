Bdataj
locationdata.binj
offsettenp