ByJ
ˆX…ˆDUÕ]UÝ