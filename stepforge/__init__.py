"""stepforge"""
