
ByJ(¾¾¾A³A³444aAaAFFFd@d@FFFd@d@