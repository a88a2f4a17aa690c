"""stepforge.compiler"""
